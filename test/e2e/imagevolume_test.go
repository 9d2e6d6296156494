package e2e

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
)

// Image volumes need a runtime that mounts images (containerd 2.1 and later): the specs run on the storage
// bed (make e2e-storage, containerd 2.x).
var _ = Describe("Image volumes on the real node", Label("storage-bed"), func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	It("mounts an image's files, and a subPath of it, read-only into the container", func() {
		create(shPod(ns, "imgvol", `ls /whole/bin/busybox /part/busybox && touch /whole/x 2>&1; sleep 3600`, func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "img", VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{
				Reference: "docker.io/library/busybox:latest", PullPolicy: corev1.PullIfNotPresent}}}}
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{
				{Name: "img", MountPath: "/whole"}, {Name: "img", MountPath: "/part", SubPath: "bin"}}
		}))
		Eventually(func(g Gomega) {
			p := getPod(g, ns, "imgvol")
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
			log := containerLog(p, "main", 0)
			g.Expect(log).To(ContainSubstring("/whole/bin/busybox"))
			g.Expect(log).To(ContainSubstring("/part/busybox"))
			g.Expect(log).To(ContainSubstring("Read-only file system"))
		}, 60*time.Second).Should(Succeed())
	})
})
