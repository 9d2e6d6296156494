package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// inSystemd runs a command inside the bed's systemd (hack/systemd.sh exec): its system D-Bus and logind.
func inSystemd(args ...string) string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", append([]string{filepath.Join(filepath.Dir(bedShell), "systemd.sh"), "exec"}, args...)...)
	out, err := cmd.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "systemd.sh exec %s:\n%s", strings.Join(args, " "), out)
	return string(out)
}

// prepareForShutdown sends logind's PrepareForShutdown signal on the system bus, as the upstream
// GracefulNodeShutdown specs do (true: the machine is going down; false: cancelled).
func prepareForShutdown(b bool) {
	inSystemd("dbus-send", "--system", "--type=signal", "/org/freedesktop/login1",
		"org.freedesktop.login1.Manager.PrepareForShutdown", "boolean:"+map[bool]string{true: "true", false: "false"}[b])
}

// inhibitors lists logind's inhibitor locks.
func inhibitors() string {
	return inSystemd("busctl", "call", "org.freedesktop.login1", "/org/freedesktop/login1", "org.freedesktop.login1.Manager", "ListInhibitors")
}

// trappingPod ignores SIGTERM: it ends only when its grace period runs out (the upstream spec's pod).
func trappingPod(ns, name string, grace int64, mutate ...func(*corev1.Pod)) *corev1.Pod {
	p := shPod(ns, name, `sleep 9999999 & PID=$!; trap 'echo Caught SIGTERM; wait $PID' TERM; wait $PID`, mutate...)
	p.Spec.TerminationGracePeriodSeconds = ptr.To(grace)
	return p
}

func isShutDown(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodFailed && p.Status.Reason == "Terminated" &&
		p.Status.Message == "Pod was terminated in response to imminent node shutdown."
}

// Needs the bed under systemd with logind (make e2e-systemd: CGROUP_DRIVER=systemd LOGIND=1).
var _ = Describe("Graceful node shutdown", Label("logind-bed"), Ordered, func() {
	var ns string
	BeforeAll(func() {
		ns = newNamespace()
		dir := filepath.Join(bedDir, "shutdown.conf.d")
		Expect(os.MkdirAll(dir, 0o755)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(dir, "10-shutdown.conf"), []byte(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
shutdownGracePeriod: 20s
shutdownGracePeriodCriticalPods: 10s
`), 0o644)).To(Succeed())
		restartNodelet("NODELET_EXTRA_ARGS=--config-dir " + dir)
		DeferCleanup(func() {
			prepareForShutdown(false)
			restartNodelet()
			Eventually(func(g Gomega) {
				g.Expect(nodeCondition(getNode(g), corev1.NodeReady).Status).To(Equal(corev1.ConditionTrue))
			}, 60*time.Second).Should(Succeed())
		})
		Eventually(inhibitors, 30*time.Second).Should(ContainSubstring("Kubelet needs time to handle node shutdown"),
			"the agent's delay inhibitor lock")
		Expect(inSystemd("busctl", "get-property", "org.freedesktop.login1", "/org/freedesktop/login1",
			"org.freedesktop.login1.Manager", "InhibitDelayMaxUSec")).To(Equal("t 20000000\n"),
			"logind's InhibitDelayMaxSec raised to the shutdown grace period")
	})

	It("stops pods lowest priority first within their periods, turns the node NotReady, and takes it back on a cancel", func() {
		create(trappingPod(ns, "regular", 120))
		create(trappingPod(ns, "critical", 120, func(p *corev1.Pod) { p.Spec.PriorityClassName = "system-node-critical" }))
		for _, name := range []string{"regular", "critical"} {
			Eventually(func(g Gomega) {
				g.Expect(getPod(g, ns, name).Status.Phase).To(Equal(corev1.PodRunning))
			}, 60*time.Second).Should(Succeed())
		}

		start := time.Now()
		prepareForShutdown(true)
		Eventually(func(g Gomega) {
			ready := nodeCondition(getNode(g), corev1.NodeReady)
			g.Expect(ready.Status).To(Equal(corev1.ConditionFalse))
			g.Expect(ready.Reason).To(Equal("KubeletNotReady"))
			g.Expect(ready.Message).To(Equal("node is shutting down"))
		}, 10*time.Second).Should(Succeed())

		create(shPod(ns, "late", "sleep 3600"))
		Eventually(func(g Gomega) {
			p := getPod(g, ns, "late")
			g.Expect(p.Status.Phase).To(Equal(corev1.PodFailed))
			g.Expect(p.Status.Reason).To(Equal("NodeShutdown"))
			g.Expect(p.Status.Message).To(Equal("Pod was rejected: Pod was rejected as the node is shutting down."))
		}, 10*time.Second).Should(Succeed())

		// The regular pod has the first 10 s (shutdownGracePeriod - shutdownGracePeriodCriticalPods): it
		// ignores SIGTERM, so it ends when they run out; the critical pod runs on until then.
		Eventually(func(g Gomega) {
			p := getPod(g, ns, "regular")
			g.Expect(isShutDown(p)).To(BeTrue(), "status %+v", p.Status)
			g.Expect(podCondition(p, corev1.DisruptionTarget)).To(Equal(corev1.ConditionTrue))
			g.Expect(getPod(g, ns, "critical").Status.Phase).To(Equal(corev1.PodRunning))
		}, 30*time.Second).Should(Succeed())
		report("graceful shutdown: regular pod stopped %.1fs after PrepareForShutdown (group period 10s)", time.Since(start).Seconds())
		Eventually(func(g Gomega) {
			g.Expect(isShutDown(getPod(g, ns, "critical"))).To(BeTrue())
		}, 30*time.Second).Should(Succeed())
		report("graceful shutdown: critical pod stopped %.1fs after PrepareForShutdown (both periods 20s)", time.Since(start).Seconds())
		Eventually(inhibitors, 10*time.Second).ShouldNot(ContainSubstring("Kubelet needs time to handle node shutdown"),
			"the lock released once the pods stopped")
		_, err := os.Stat(filepath.Join(agentRoot(), "graceful_node_shutdown_state"))
		Expect(err).NotTo(HaveOccurred())

		prepareForShutdown(false)
		Eventually(func(g Gomega) {
			g.Expect(nodeCondition(getNode(g), corev1.NodeReady).Status).To(Equal(corev1.ConditionTrue))
		}, 30*time.Second).Should(Succeed())
		Eventually(inhibitors, 10*time.Second).Should(ContainSubstring("Kubelet needs time to handle node shutdown"),
			"the lock taken again")
		create(shPod(ns, "after", "sleep 3600"))
		Eventually(func(g Gomega) {
			g.Expect(getPod(g, ns, "after").Status.Phase).To(Equal(corev1.PodRunning))
		}, 60*time.Second).Should(Succeed())
	})
})
