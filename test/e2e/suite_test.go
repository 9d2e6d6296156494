package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/runtime"
)

var (
	k8s      client.Client
	bedDir   string
	bedShell string
	nodeName string
	cri      *runtime.Client
)

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(200 * time.Millisecond)
	RunSpecs(t, "nodelet e2e suite")
}

var _ = BeforeSuite(func() {
	bedDir, bedShell = os.Getenv("NODELET_BED_DIR"), os.Getenv("NODELET_BED_SCRIPT")
	Expect(bedDir).NotTo(BeEmpty(), "NODELET_BED_DIR is not set: run the suite with `make e2e` (hack/e2e.sh)")
	Expect(bedShell).NotTo(BeEmpty(), "NODELET_BED_SCRIPT is not set: run the suite with `make e2e` (hack/e2e.sh)")
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	Expect(err).NotTo(HaveOccurred())
	k8s, err = client.New(cfg, client.Options{Scheme: clientgoscheme.Scheme})
	Expect(err).NotTo(HaveOccurred())
	nodeName = os.Getenv("NODE_NAME")
	if nodeName == "" {
		h, err := os.Hostname()
		Expect(err).NotTo(HaveOccurred())
		nodeName = strings.ToLower(h)
	}
	cri, err = runtime.Dial("unix://"+filepath.Join(bedDir, "run", "containerd.sock"), runtime.Options{Timeout: 10 * time.Second})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { _ = cri.Close() })
})

// bed runs hack/bed.sh with the suite's bed, e.g. bed("stop", "containerd").
func bed(args ...string) { bedEnv(nil, args...) }

// bedCommandTimeout bounds one bed.sh call: its own waits end within a minute or two (a component's start-up
// deadline, a stop's SIGKILL), so a call still running after this is stuck, and fails its spec with what it
// printed instead of holding the suite until go test's deadline.
const bedCommandTimeout = 4 * time.Minute

// bedEnv runs hack/bed.sh with extra environment.
func bedEnv(env []string, args ...string) {
	ctx, cancel := context.WithTimeout(context.Background(), bedCommandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", append([]string{bedShell}, args...)...)
	cmd.Env = append(append(os.Environ(), "BED_DIR="+bedDir), env...)
	// bed.sh's children (curl, kubectl) may hold the output pipe after bash is killed: stop waiting for them.
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "bed.sh %s (ctx: %v):\n%s", strings.Join(args, " "), ctx.Err(), out)
}

func getNode(g Gomega) *corev1.Node {
	n := &corev1.Node{}
	g.Expect(k8s.Get(context.Background(), types.NamespacedName{Name: nodeName}, n)).To(Succeed())
	return n
}

func nodeCondition(n *corev1.Node, t corev1.NodeConditionType) corev1.NodeCondition {
	for _, c := range n.Status.Conditions {
		if c.Type == t {
			return c
		}
	}
	return corev1.NodeCondition{}
}

// report prints a measured figure in a form that is easy to find in CI logs.
func report(format string, args ...any) {
	fmt.Fprintf(GinkgoWriter, "MEASURED: "+format+"\n", args...)
	AddReportEntry("measured", fmt.Sprintf(format, args...))
}
