package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/podrules"
	"github.com/nodelet/nodelet/runtime"
)

const mirrorAnnotation = "kubernetes.io/config.mirror"

func staticManifest(name, script string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
  labels: {app: %s}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: busybox
    command: ["sh", "-c", %q]
`, name, name, script)
}

func writeManifest(dir, file, content string) {
	Expect(os.MkdirAll(dir, 0o755)).To(Succeed())
	tmp := filepath.Join(dir, "."+file+".tmp") // dotfiles are ignored: write, then rename into place
	Expect(os.WriteFile(tmp, []byte(content), 0o644)).To(Succeed())
	Expect(os.Rename(tmp, filepath.Join(dir, file))).To(Succeed())
}

func mirrorPod(g Gomega, name string) *corev1.Pod {
	p := &corev1.Pod{}
	g.Expect(k8s.Get(context.Background(), types.NamespacedName{Namespace: "default", Name: name + "-" + nodeName}, p)).To(Succeed())
	g.Expect(p.Annotations).To(HaveKey(mirrorAnnotation))
	return p
}

// runningByPodName returns the running CRI containers of pods named podName.
func runningByPodName(podName string) []*runtimeapi.Container {
	cs, err := cri.ListContainers(context.Background(), &runtimeapi.ContainerFilter{
		State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
		LabelSelector: map[string]string{runtime.LabelPodName: podName}})
	Expect(err).NotTo(HaveOccurred())
	return cs
}

var _ = Describe("Static pods", Ordered, func() {
	manifests := func() string { return filepath.Join(bedDir, "manifests") }

	It("runs a dropped manifest, shows its mirror pod within 2 s, replaces it on edit and keeps it when the mirror is deleted", func() {
		start := time.Now()
		writeManifest(manifests(), "web.yaml", staticManifest("web", "sleep 3600"))
		var mirror *corev1.Pod
		Eventually(func(g Gomega) { mirror = mirrorPod(g, "web") }, 2*time.Second, 20*time.Millisecond).Should(Succeed())
		report("manifest written → mirror pod visible %.2fs", time.Since(start).Seconds())
		Expect(mirror.OwnerReferences).To(ContainElement(HaveField("Kind", "Node")))
		var first string
		Eventually(func(g Gomega) {
			p := mirrorPod(g, "web")
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
			first = p.Status.ContainerStatuses[0].ContainerID
		}, 30*time.Second).Should(Succeed())

		By("deleting the mirror pod: it comes back and the container is not restarted")
		Expect(k8s.Delete(context.Background(), mirror)).To(Succeed())
		Eventually(func(g Gomega) {
			p := mirrorPod(g, "web")
			g.Expect(p.UID).NotTo(Equal(mirror.UID))
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
			g.Expect(p.Status.ContainerStatuses[0].ContainerID).To(Equal(first))
		}, 30*time.Second).Should(Succeed())

		By("editing the manifest: a new pod replaces the old one")
		oldHash := mirror.Annotations[mirrorAnnotation]
		writeManifest(manifests(), "web.yaml", staticManifest("web", "sleep 3601"))
		Eventually(func(g Gomega) {
			p := mirrorPod(g, "web")
			g.Expect(p.Annotations[mirrorAnnotation]).NotTo(Equal(oldHash))
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
			g.Expect(p.Status.ContainerStatuses[0].ContainerID).NotTo(Equal(first))
			g.Expect(runningByPodName("web-" + nodeName)).To(HaveLen(1))
		}, 30*time.Second).Should(Succeed())

		By("taking the manifest away and putting it back unchanged while the pod stops: it runs again")
		current := mirrorPod(Default, "web")
		Expect(os.Remove(filepath.Join(manifests(), "web.yaml"))).To(Succeed())
		Eventually(func(g Gomega) {
			err := k8s.Get(context.Background(), types.NamespacedName{Namespace: "default", Name: "web-" + nodeName}, &corev1.Pod{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
		}, 30*time.Second, 20*time.Millisecond).Should(Succeed())
		writeManifest(manifests(), "web.yaml", staticManifest("web", "sleep 3601")) // its grace period is 2 s
		Eventually(func(g Gomega) {
			p := mirrorPod(g, "web")
			g.Expect(p.Annotations[mirrorAnnotation]).To(Equal(current.Annotations[mirrorAnnotation]))
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
			g.Expect(p.Status.ContainerStatuses).To(HaveLen(1))
			g.Expect(p.Status.ContainerStatuses[0].ContainerID).NotTo(Equal(current.Status.ContainerStatuses[0].ContainerID))
			g.Expect(runningByPodName("web-" + nodeName)).To(HaveLen(1))
		}, 30*time.Second).Should(Succeed())

		By("removing the manifest: pod and mirror go")
		Expect(os.Remove(filepath.Join(manifests(), "web.yaml"))).To(Succeed())
		Eventually(func(g Gomega) {
			err := k8s.Get(context.Background(), types.NamespacedName{Namespace: "default", Name: "web-" + nodeName}, &corev1.Pod{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
			g.Expect(runningByPodName("web-" + nodeName)).To(BeEmpty())
		}, 30*time.Second).Should(Succeed())
	})

	It("runs both pods of a PodList served at --manifest-url", func() {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		Expect(err).NotTo(HaveOccurred())
		body := `{"apiVersion":"v1","kind":"PodList","items":[` +
			`{"metadata":{"name":"url-a"},"spec":{"containers":[{"name":"main","image":"busybox","command":["sleep","3600"]}]}},` +
			`{"metadata":{"name":"url-b"},"spec":{"containers":[{"name":"main","image":"busybox","command":["sleep","3600"]}]}}]}`
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(body))
		}), ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = srv.Serve(lis) }()
		DeferCleanup(func() { _ = srv.Close() })
		restartNodelet("NODELET_EXTRA_ARGS=--manifest-url=http://" + lis.Addr().String() + "/pods")
		DeferCleanup(func() { restartNodelet() })
		Eventually(func(g Gomega) {
			for _, n := range []string{"url-a", "url-b"} {
				g.Expect(mirrorPod(g, n).Status.Phase).To(Equal(corev1.PodRunning))
			}
		}, 60*time.Second).Should(Succeed())
	})

	It("starts static pods while the API server is down and creates their mirror pods once it is back", func() {
		writeManifest(manifests(), "offline.yaml", staticManifest("offline", "sleep 3600"))
		DeferCleanup(func() { _ = os.Remove(filepath.Join(manifests(), "offline.yaml")) })
		bed("stop", "nodelet")
		bed("stop", "apiserver")
		DeferCleanup(func() { bed("start", "apiserver"); bed("start", "nodelet") })
		bedEnv([]string{"BED_NO_WAIT=1"}, "start", "nodelet")
		Eventually(func() []*runtimeapi.Container { return runningByPodName("offline-" + nodeName) }, 60*time.Second).ShouldNot(BeEmpty())
		bed("start", "apiserver")
		Eventually(func(g Gomega) {
			g.Expect(mirrorPod(g, "offline").Status.Phase).To(Equal(corev1.PodRunning))
		}, 60*time.Second).Should(Succeed())
	})

	It("runs a static pod with no kubeconfig (standalone mode)", func() {
		bin := os.Getenv("NODELET_BIN")
		Expect(bin).NotTo(BeEmpty(), "NODELET_BIN names the nodelet binary (hack/e2e.sh sets it)")
		// Under the bed's directory, which a bed inside hack/systemd.sh's namespaces sees too (its /tmp is its own).
		dir, err := os.MkdirTemp(bedDir, "standalone-")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { _ = os.RemoveAll(dir) })
		writeManifest(filepath.Join(dir, "manifests"), "alone.yaml", staticManifest("alone", "sleep 3600"))
		bed("stop", "nodelet")
		DeferCleanup(func() { bed("start", "nodelet") })
		cmd := bedCommand(bin, "--config", filepath.Join(bedDir, "nodelet", "config.yaml"),
			"--root-dir", filepath.Join(dir, "root"), "--pod-manifest-path", filepath.Join(dir, "manifests"), "-v=2")
		cmd.Stdout, cmd.Stderr = GinkgoWriter, GinkgoWriter
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		Expect(cmd.Start()).To(Succeed())
		DeferCleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
		Eventually(func() []*runtimeapi.Container { return runningByPodName("alone-" + nodeName) }, 60*time.Second).ShouldNot(BeEmpty())
		Consistently(func() error {
			return k8s.Get(context.Background(), types.NamespacedName{Namespace: "default", Name: "alone-" + nodeName}, &corev1.Pod{})
		}, "2s").ShouldNot(Succeed(), "no mirror pod without an API server")
	})
})

// bedCommand runs a command where the bed's components run: on a CGROUP_DRIVER=systemd bed on a host whose
// PID 1 is not systemd, inside hack/systemd.sh's namespaces (its systemd answers no one outside).
func bedCommand(name string, args ...string) *exec.Cmd {
	if pid1, err := os.ReadFile("/proc/1/comm"); cgroupDriver() == podrules.CgroupDriverSystemd && err == nil &&
		strings.TrimSpace(string(pid1)) != "systemd" {
		return exec.Command("bash", append([]string{filepath.Join(filepath.Dir(bedShell), "systemd.sh"), "exec", name}, args...)...)
	}
	return exec.Command(name, args...)
}

// restartNodelet restarts the bed's nodelet with extra environment for bed.sh (e.g. NODELET_EXTRA_ARGS).
func restartNodelet(env ...string) {
	bed("stop", "nodelet")
	bedEnv(env, "start", "nodelet")
}
