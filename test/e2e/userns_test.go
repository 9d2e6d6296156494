package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// defaultHandlerSupportsUserNamespaces is what the node says of its runtime's default handler.
func defaultHandlerSupportsUserNamespaces() bool {
	var supported bool
	Eventually(func(g Gomega) {
		n := getNode(g)
		g.Expect(n.Status.NodeInfo.ContainerRuntimeVersion).NotTo(BeEmpty())
		supported = false
		for _, h := range n.Status.RuntimeHandlers {
			if h.Name == "" && h.Features != nil && h.Features.UserNamespaces != nil {
				supported = *h.Features.UserNamespaces
			}
		}
	}).Should(Succeed())
	return supported
}

func hostUsersFalse(p *corev1.Pod) { p.Spec.HostUsers = ptr.To(false) }

var _ = Describe("User namespaces (hostUsers: false) on the real node", func() {
	It("gives each pod an ID range of its own, kept in its directory, where the runtime supports them; refuses the pod with the kubelet's message where not", func() {
		ns := newNamespace()
		if !defaultHandlerSupportsUserNamespaces() {
			// containerd 1.x announces no runtime handlers: the kubelet and nodelet refuse the sandbox.
			before := nodeMetric("kubelet_started_user_namespaced_pods_errors_total")
			create(shPod(ns, "refused", "sleep 3600", hostUsersFalse))
			Eventually(func(g Gomega) {
				g.Expect(podEvents(g, ns, "refused")).To(ContainElement(
					"FailedCreatePodSandBox: Failed to create pod sandbox: can't set `spec.hostUsers: false`, runtime does not support user namespaces"))
				p := getPod(g, ns, "refused")
				g.Expect(p.Status.Phase).To(Equal(corev1.PodPending))
				g.Expect(p.Status.ContainerStatuses).To(HaveLen(1))
				g.Expect(p.Status.ContainerStatuses[0].State.Waiting).NotTo(BeNil())
				g.Expect(p.Status.ContainerStatuses[0].State.Waiting.Reason).To(Equal("ContainerCreating"))
			}, 60*time.Second).Should(Succeed())
			Expect(nodeMetric("kubelet_started_user_namespaced_pods_errors_total")).To(BeNumerically(">", before))
			return
		}
		Expect(k8s.Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "data"},
			Data: map[string]string{"key": "value"}})).To(Succeed())
		withVolume := func(p *corev1.Pod) {
			hostUsersFalse(p)
			p.Spec.SecurityContext = &corev1.PodSecurityContext{FSGroup: ptr.To[int64](200)}
			p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "data"}}}}}
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
		}
		a := create(shPod(ns, "a", "sleep 3600", withVolume))
		b := create(shPod(ns, "b", "sleep 3600", hostUsersFalse))
		mapA := strings.Fields(execIn(a, "cat", "/proc/self/uid_map"))
		mapB := strings.Fields(execIn(b, "cat", "/proc/self/uid_map"))
		Expect(mapA).To(HaveLen(3))
		Expect(mapA[0]).To(Equal("0"))
		Expect(mapA[2]).To(Equal("65536"))
		Expect(mapB[1]).NotTo(Equal(mapA[1]), "two pods share host IDs")
		Expect(execIn(a, "cat", "/proc/self/gid_map")).To(Equal(execIn(a, "cat", "/proc/self/uid_map")))

		By("the range is the one recorded in the pod's directory, in the kubelet's format")
		file := filepath.Join(agentRoot(), "pods", string(a.UID), "userns")
		data, err := os.ReadFile(file)
		Expect(err).NotTo(HaveOccurred())
		var rec struct {
			UIDMappings []struct{ HostID, ContainerID, Length uint32 } `json:"uidMappings"`
		}
		Expect(json.Unmarshal(data, &rec)).To(Succeed())
		Expect(rec.UIDMappings).To(HaveLen(1))
		Expect(rec.UIDMappings[0].Length).To(BeEquivalentTo(65536))
		Expect(mapA[1]).To(Equal(fmt.Sprint(rec.UIDMappings[0].HostID)))

		By("volumes are ID-mapped: the files are root's inside, the fsGroup group's")
		Expect(strings.TrimSpace(execIn(a, "stat", "-L", "-c", "%u %g", "/data/key"))).To(Equal("0 200"))

		By("a pod in the host's user namespace sees the whole range")
		host := create(shPod(ns, "host", "sleep 3600"))
		Expect(strings.Fields(execIn(host, "cat", "/proc/self/uid_map"))).To(Equal([]string{"0", "0", "4294967295"}))

		By("a deleted pod's range is released with its file")
		Expect(k8s.Delete(context.Background(), a, client.GracePeriodSeconds(0))).To(Succeed())
		Eventually(func() bool {
			_, err := os.Stat(file)
			return os.IsNotExist(err)
		}, 90*time.Second).Should(BeTrue())
	})
})
