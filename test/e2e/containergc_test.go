package e2e

import (
	"path/filepath"
	"sort"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

var _ = Describe("Container garbage collection on the real node", func() {
	// A container that exits at once restarts at once, then after 10 s and 20 s of back-off: its third
	// restart comes some 35 s after the pod starts. The collector runs every minute (the kubelet's
	// ContainerGCPeriod) with the kubelet's defaults (one dead container per container, no minimum age), so
	// within a minute of that the older attempts are gone. About 2 minutes in all.
	It("keeps at most one dead container of a crash-looping pod's container, with its restart count and --previous log", func() {
		ns := newNamespace()
		p := create(shPod(ns, "crashgc", "echo attempt; exit 1"))
		var restarts int32
		Eventually(func(g Gomega) {
			statuses := getPod(g, ns, "crashgc").Status.ContainerStatuses
			g.Expect(statuses).To(HaveLen(1))
			restarts = statuses[0].RestartCount
			g.Expect(restarts).To(BeNumerically(">=", 3))
		}, 90*time.Second, 250*time.Millisecond).Should(Succeed())

		By("waiting for a collection: at most the newest container and one dead one before it remain")
		Eventually(func(g Gomega) {
			var mine []*runtimeapi.Container
			for _, c := range runtimeContainers(p.UID) {
				if c.GetMetadata().GetName() == "main" {
					mine = append(mine, c)
				}
			}
			sort.Slice(mine, func(i, j int) bool { return mine[i].GetCreatedAt() > mine[j].GetCreatedAt() })
			g.Expect(len(mine)).To(BeNumerically(">=", 1))
			dead := 0
			for _, c := range mine[1:] { // besides the newest, running or not
				if c.GetState() == runtimeapi.ContainerState_CONTAINER_EXITED {
					dead++
				}
			}
			g.Expect(len(mine)).To(BeNumerically("<=", 2), "containers of main: %d, %d dead besides the newest", len(mine), dead)
			g.Expect(dead).To(BeNumerically("<=", 1))
		}, 70*time.Second, time.Second).Should(Succeed())
		Expect(containerLogPath(p, "main", 0)).NotTo(BeAnExistingFile(), "the first attempt's log goes with its container")
		report("container GC: %d attempts of a crash-looping container so far, %d kept on the node (the newest and the dead one before it), the rest removed with their logs",
			restarts+1, len(runtimeContainers(p.UID)))

		By("the restart count did not go down and the previous attempt's log is still served")
		Eventually(func(g Gomega) {
			cs := getPod(g, ns, "crashgc").Status.ContainerStatuses[0]
			g.Expect(cs.RestartCount).To(BeNumerically(">=", restarts))
			g.Expect(cs.LastTerminationState.Terminated).NotTo(BeNil())
			g.Expect(cs.LastTerminationState.Terminated.ExitCode).To(BeEquivalentTo(1))
		}, 10*time.Second, 250*time.Millisecond).Should(Succeed())
		Eventually(func(g Gomega) {
			out, code := kubectl("-n", ns, "logs", "crashgc", "--previous")
			g.Expect(code).To(BeZero(), out)
			g.Expect(out).To(Equal("attempt\n"))
		}, 10*time.Second, time.Second).Should(Succeed())
	})
})

// containerLogPath is where the bed's runtime writes a container attempt's log (podLogsDir is
// <bed>/logs/pods, as containerLog reads it).
func containerLogPath(p *corev1.Pod, container string, attempt int) string {
	return filepath.Join(bedDir, "logs", "pods", p.Namespace+"_"+p.Name+"_"+string(p.UID), container,
		strconv.Itoa(attempt)+".log")
}
