package podlifecycle_test

import (
	"os"
	"path/filepath"
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

	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/runtime/fake"
)

// The envtest specs of the pod lifecycle run the whole agent (agent.New, see podBed) against a real API
// server, with the node's own credentials, over an in-memory runtime.
var (
	testEnv *envtest.Environment
	admin   client.Client
)

func TestPodLifecycle(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Pod Lifecycle Suite")
}

var _ = BeforeSuite(func() {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	// A whole agent under -race, beside the other packages' tests: Gomega's default of 1 s is too short for
	// a chain of syncs (what must not happen within a period is checked on a fake clock, see clock_test.go).
	SetDefaultEventuallyTimeout(5 * time.Second)
	Expect(os.Getenv("KUBEBUILDER_ASSETS")).NotTo(BeEmpty(),
		"KUBEBUILDER_ASSETS must point at etcd, kube-apiserver and kubectl (run the tests with `make test`)")
	testEnv = &envtest.Environment{}
	// Run the API server as a real cluster does, so the agent is tested with a node's own rights.
	args := testEnv.ControlPlane.GetAPIServer().Configure()
	args.Set("authorization-mode", "Node", "RBAC")
	args.Set("enable-admission-plugins", "NodeRestriction")
	adminCfg, err := testEnv.Start()
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
	u, err := testEnv.AddUser(envtest.User{Name: "system:node:" + nodeName, Groups: []string{"system:nodes"}}, nil)
	Expect(err).NotTo(HaveOccurred())
	return u.Config()
}

// startFakeRuntime serves an in-memory CRI runtime and returns it with a real client connected to it.
func startFakeRuntime(opts ...fake.Option) (*fake.Runtime, *runtime.Client) {
	dir, err := os.MkdirTemp("", "nodelet-cri")
	Expect(err).NotTo(HaveOccurred())
	rt := fake.New(opts...)
	endpoint, err := rt.Start(filepath.Join(dir, "cri.sock"))
	Expect(err).NotTo(HaveOccurred())
	c, err := runtime.Dial(endpoint, runtime.Options{})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		_ = c.Close()
		rt.Stop()
		_ = os.RemoveAll(dir)
	})
	return rt, c
}
