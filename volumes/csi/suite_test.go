package csi_test

import (
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/nodelet/nodelet/internal/nodeenv"
)

var (
	testEnv *envtest.Environment
	admin   client.Client
)

// TestCSINodeSuite runs the specs against a real API server (envtest, KUBEBUILDER_ASSETS) with the Node
// authorizer and NodeRestriction, the node writing with its own credentials.
func TestCSINodeSuite(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "CSI node suite")
}

var _ = BeforeSuite(func() {
	SetDefaultEventuallyTimeout(10 * time.Second)
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	env, cfg, err := nodeenv.Start()
	Expect(err).NotTo(HaveOccurred())
	testEnv = env
	admin, err = client.New(cfg, client.Options{Scheme: clientgoscheme.Scheme})
	Expect(err).NotTo(HaveOccurred())
})

var _ = AfterSuite(func() {
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
})

// nodeClient is a client with the credentials of nodeName's kubelet (system:node:<name>).
func nodeClient(nodeName string) client.Client {
	cfg, err := nodeenv.NodeConfig(testEnv, nodeName)
	Expect(err).NotTo(HaveOccurred())
	c, err := client.New(cfg, client.Options{Scheme: clientgoscheme.Scheme})
	Expect(err).NotTo(HaveOccurred())
	return c
}
