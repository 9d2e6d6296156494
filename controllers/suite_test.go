package controllers_test

import (
	"time"

	"context"
	"net/http"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/nodelet/nodelet/controllers"
	"github.com/nodelet/nodelet/internal/nodeenv"
	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/runtime/fake"
)

var (
	testEnv  *envtest.Environment
	adminCfg *rest.Config
	admin    client.Client
)

func TestControllers(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Controllers Suite")
}

var _ = BeforeSuite(func() {
	// Waits on a loaded 2-core machine (CI runs the suites beside other work) need more than Gomega's 1 s.
	SetDefaultEventuallyTimeout(15 * time.Second)
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	// The API server runs as a real cluster's does, so the agent is tested with a node's own rights.
	var err error
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

// newNodeManager builds a manager as main does, scoped to nodeName, with the node's credentials.
func newNodeManager(nodeName string) ctrl.Manager {
	mgr, err := ctrl.NewManager(nodeConfig(nodeName), ctrl.Options{
		Scheme:                 clientgoscheme.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  controllers.CacheOptions(nodeName),
		MapperProvider: func(*rest.Config, *http.Client) (meta.RESTMapper, error) {
			return controllers.RESTMapper(), nil
		},
		Client: controllers.ClientOptions(),
		// Each spec starts its own manager in one process: controller names repeat.
		Controller: ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
	})
	Expect(err).NotTo(HaveOccurred())
	return mgr
}

// startManager runs mgr until the spec ends.
func startManager(mgr ctrl.Manager) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(done)
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
	DeferCleanup(func() {
		cancel()
		<-done
	})
}

// startFakeRuntime serves an in-memory CRI runtime and returns it with a real client connected to it.
func startFakeRuntime(opts ...fake.Option) (*fake.Runtime, *runtime.Client) {
	rt, c, stop, err := nodeenv.FakeRuntime(opts...)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(stop)
	return rt, c
}
