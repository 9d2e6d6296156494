package integration_test

import (
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/nodelet/nodelet/internal/nodeenv"
	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/runtime/fake"
)

// The integration specs run the whole agent (agent.New, see podBed) against a real API
// server, with the node's own credentials, over an in-memory runtime.
var (
	testEnv *envtest.Environment
	admin   client.Client
)

func TestIntegration(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Integration Suite")
}

var _ = BeforeSuite(func() {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	// A whole agent under -race, beside the other packages' tests: Gomega's default of 1 s is too short for
	// a chain of syncs (what must not happen within a period is checked on a fake clock: podlifecycle/clock_test.go, agent_test.go).
	SetDefaultEventuallyTimeout(15 * time.Second)
	// The API server runs as a real cluster's does, so the agent is tested with a node's own rights.
	var err error
	var adminCfg *rest.Config
	testEnv, adminCfg, err = nodeenv.Start()
	Expect(err).NotTo(HaveOccurred())
	admin, err = client.New(adminCfg, client.Options{Scheme: clientgoscheme.Scheme})
	Expect(err).NotTo(HaveOccurred())
})

var _ = AfterSuite(func() {
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
})

// nodeConfig returns a REST config that authenticates as the kubelet of nodeName (system:node:<name> in
// system:nodes), so tests run under the Node authorizer and NodeRestriction exactly as the agent does.
func nodeConfig(nodeName string) *rest.Config {
	cfg, err := nodeenv.NodeConfig(testEnv, nodeName)
	Expect(err).NotTo(HaveOccurred())
	return cfg
}

// startFakeRuntime serves an in-memory CRI runtime and returns it with a real client connected to it.
func startFakeRuntime(opts ...fake.Option) (*fake.Runtime, *runtime.Client) {
	rt, c, stop, err := nodeenv.FakeRuntime(opts...)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(stop)
	return rt, c
}
