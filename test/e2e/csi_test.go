package e2e

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
)

// The storage bed's agent root (the upstream CSI manifests hard-code the kubelet's).
const storageRoot = "/var/lib/kubelet"

const hostpathDriver = "hostpath.csi.k8s.io"

// csiClaim is a claim of size on the csi-hostpath StorageClass.
func csiClaim(ns, name, size string) *corev1.PersistentVolumeClaim {
	c := claim(ns, name)
	c.Spec.StorageClassName = new("csi-hostpath-sc")
	c.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse(size)
	return c
}

// boundVolume waits for the claim to be bound and returns its PersistentVolume.
func boundVolume(ns, name string) *corev1.PersistentVolume {
	pv := &corev1.PersistentVolume{}
	Eventually(func(g Gomega) {
		c := &corev1.PersistentVolumeClaim{}
		g.Expect(k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, c)).To(Succeed())
		g.Expect(c.Spec.VolumeName).NotTo(BeEmpty())
		g.Expect(k8s.Get(context.Background(), types.NamespacedName{Name: c.Spec.VolumeName}, pv)).To(Succeed())
	}, 60*time.Second).Should(Succeed())
	return pv
}

func sha256Hex(s string) string { return fmt.Sprintf("%x", sha256.Sum256([]byte(s))) }

var _ = Describe("CSI volumes on the real node", Label("storage-bed"), Ordered, func() {
	var ns string
	BeforeAll(func() {
		script := filepath.Join(filepath.Dir(bedShell), "storage.sh")
		cmd := exec.Command("bash", script, "up")
		cmd.Env = append(os.Environ(), "BED_DIR="+bedDir, "NODE_NAME="+nodeName)
		out, err := cmd.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "storage.sh up: %s", out)
	})
	BeforeEach(func() { ns = newNamespace() })

	It("registers the hostpath driver in the node's CSINode and annotation", func() {
		Eventually(func(g Gomega) {
			cn := &storagev1.CSINode{}
			g.Expect(k8s.Get(context.Background(), types.NamespacedName{Name: nodeName}, cn)).To(Succeed())
			g.Expect(cn.Spec.Drivers).To(ContainElement(HaveField("Name", hostpathDriver)))
			n := getNode(g)
			g.Expect(n.Annotations).To(HaveKeyWithValue("csi.volume.kubernetes.io/nodeid", ContainSubstring(hostpathDriver)))
		}).Should(Succeed())
	})

	It("runs a pod on a csi-hostpath claim with the kubelet's layout, tears it down, and hands its data on", func() {
		ctx := context.Background()
		Expect(k8s.Create(ctx, csiClaim(ns, "data", "16Mi"))).To(Succeed())
		pv := boundVolume(ns, "data")
		handle := pv.Spec.CSI.VolumeHandle
		unique := corev1.UniqueVolumeName("kubernetes.io/csi/" + hostpathDriver + "^" + handle)
		p := create(shPod(ns, "writer", `echo csi-data > /data/note && sleep 3600`, withClaim("data", false)))
		Eventually(func(g Gomega) {
			p = getPod(g, ns, "writer")
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
		}, 90*time.Second).Should(Succeed())
		Expect(getNodeNow().Status.VolumesInUse).To(ContainElement(unique))
		staging := filepath.Join(storageRoot, "plugins/kubernetes.io/csi", hostpathDriver, sha256Hex(handle), "globalmount")
		target := filepath.Join(storageRoot, "pods", string(p.UID), "volumes/kubernetes.io~csi", pv.Name, "mount")
		Expect(mountPointsOf(string(p.UID))).To(ContainElement(target))
		Expect(filepath.Join(filepath.Dir(target), "vol_data.json")).To(BeARegularFile())
		Expect(filepath.Join(filepath.Dir(staging), "vol_data.json")).To(BeARegularFile())

		Expect(k8s.Delete(ctx, p)).To(Succeed())
		waitGone(ns, "writer", 90*time.Second)
		Eventually(func() []string { return mountPointsOf(string(p.UID)) }).Should(BeEmpty())
		Eventually(func() bool { _, err := os.Stat(filepath.Dir(staging)); return os.IsNotExist(err) }, 30*time.Second).Should(BeTrue(), "unstaged")
		Eventually(func(g Gomega) {
			g.Expect(getNode(g).Status.VolumesInUse).NotTo(ContainElement(unique))
			va := &storagev1.VolumeAttachment{}
			err := k8s.Get(ctx, types.NamespacedName{Name: "csi-" + sha256Hex(handle+hostpathDriver+nodeName)}, va)
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "VolumeAttachment detached and gone: %v", err)
		}, 90*time.Second).Should(Succeed())

		create(shPod(ns, "reader", `cat /data/note; sleep 3600`, withClaim("data", false)))
		Eventually(func(g Gomega) {
			r := getPod(g, ns, "reader")
			g.Expect(r.Status.Phase).To(Equal(corev1.PodRunning))
			g.Expect(containerLog(r, "main", 0)).To(ContainSubstring("csi-data"))
		}, 90*time.Second).Should(Succeed())
	})

	It("expands a claim in use on the node", func() {
		ctx := context.Background()
		Expect(k8s.Create(ctx, csiClaim(ns, "grow", "16Mi"))).To(Succeed())
		create(shPod(ns, "grower", `sleep 3600`, withClaim("grow", false)))
		Eventually(func(g Gomega) { g.Expect(getPod(g, ns, "grower").Status.Phase).To(Equal(corev1.PodRunning)) }, 90*time.Second).Should(Succeed())
		c := &corev1.PersistentVolumeClaim{}
		Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "grow"}, c)).To(Succeed())
		c.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("32Mi")
		Expect(k8s.Update(ctx, c)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "grow"}, c)).To(Succeed())
			g.Expect(c.Status.Capacity.Storage().String()).To(Equal("32Mi"))
			g.Expect(c.Status.AllocatedResourceStatuses).To(BeEmpty())
		}, 90*time.Second).Should(Succeed())
	})

	It("gives a container a raw block csi-hostpath claim", func() {
		ctx := context.Background()
		c := csiClaim(ns, "raw", "16Mi")
		c.Spec.VolumeMode = new(corev1.PersistentVolumeBlock)
		Expect(k8s.Create(ctx, c)).To(Succeed())
		create(shPod(ns, "raw", `echo block-data | dd of=/dev/xvdb bs=512 count=1 conv=sync 2>/dev/null; dd if=/dev/xvdb bs=512 count=1 2>/dev/null | head -c 10; echo; sleep 3600`,
			func(p *corev1.Pod) {
				p.Spec.Volumes = []corev1.Volume{{Name: "raw", VolumeSource: corev1.VolumeSource{
					PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "raw"}}}}
				p.Spec.Containers[0].VolumeDevices = []corev1.VolumeDevice{{Name: "raw", DevicePath: "/dev/xvdb"}}
			}))
		Eventually(func(g Gomega) {
			p := getPod(g, ns, "raw")
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
			g.Expect(containerLog(p, "main", 0)).To(ContainSubstring("block-data"))
		}, 90*time.Second).Should(Succeed())
	})

	It("starts pods on fresh csi-hostpath claims (create → Running, 10 pods one after another)", func() {
		ctx := context.Background()
		var took []time.Duration
		for i := range 10 {
			name := fmt.Sprintf("start-%d", i)
			start := time.Now()
			Expect(k8s.Create(ctx, csiClaim(ns, name, "1Mi"))).To(Succeed())
			create(shPod(ns, name, `sleep 3600`, withClaim(name, false)))
			Eventually(func(g Gomega) { g.Expect(getPod(g, ns, name).Status.Phase).To(Equal(corev1.PodRunning)) },
				90*time.Second, 50*time.Millisecond).Should(Succeed())
			took = append(took, time.Since(start))
		}
		sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
		report("pod start with a fresh csi-hostpath claim (claim and pod created → Running): p50 %.2fs, min %.2fs, max %.2fs over %d",
			took[len(took)/2].Seconds(), took[0].Seconds(), slices.Max(took).Seconds(), len(took))
	})

	It("runs a pod on kind's default StorageClass (local-path)", func() {
		ctx := context.Background()
		c := claim(ns, "lp")
		c.Spec.StorageClassName = nil // the default class, "standard"
		Expect(k8s.Create(ctx, c)).To(Succeed())
		// The class binds on first use: the scheduler must place the pod (it picks the claim's node).
		create(shPod(ns, "lp", `echo local-path > /data/note && cat /data/note && sleep 3600`, withClaim("lp", false),
			func(p *corev1.Pod) { p.Spec.NodeName = "" }))
		Eventually(func(g Gomega) {
			p := getPod(g, ns, "lp")
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
			g.Expect(containerLog(p, "main", 0)).To(ContainSubstring("local-path"))
		}, 120*time.Second).Should(Succeed())
	})
})

// getNodeNow reads the node once.
func getNodeNow() *corev1.Node {
	n := &corev1.Node{}
	Expect(k8s.Get(context.Background(), types.NamespacedName{Name: nodeName}, n)).To(Succeed())
	return n
}
