package e2e

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// claim is a ReadWriteOnce claim of 1Mi with no storage class: bound only to a volume made for it.
func claim(ns, name string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: new(""),
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")}},
		},
	}
}

// persistentVolume is a 1Mi volume with the given source, pre-bound to the claim ns/claimName and
// pinned to this node.
func persistentVolume(name, ns, claimName string, src corev1.PersistentVolumeSource) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              "",
			PersistentVolumeSource:        src,
			ClaimRef:                      &corev1.ObjectReference{Namespace: ns, Name: claimName},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{nodeName}}},
			}}}},
		},
	}
}

// withClaim mounts the claim at /data in the main container.
func withClaim(claimName string, readOnly bool) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claimName, ReadOnly: readOnly}}})
		p.Spec.Containers[0].VolumeMounts = append(p.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "data", MountPath: "/data"})
	}
}

// mountPointsOf lists this host's mount points whose path contains s.
func mountPointsOf(s string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = f.Close() }()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) > 4 && strings.Contains(fields[4], s) {
			out = append(out, fields[4])
		}
	}
	return out
}

// loopDevice is a loop device over a new file of size bytes, detached and removed after the spec.
func loopDevice(size int64) string {
	backing, err := os.CreateTemp("", "nodelet-loop-")
	Expect(err).NotTo(HaveOccurred())
	Expect(backing.Truncate(size)).To(Succeed())
	Expect(backing.Close()).To(Succeed())
	DeferCleanup(func() { _ = os.Remove(backing.Name()) })
	out, err := exec.Command("losetup", "-f", "--show", backing.Name()).Output()
	Expect(err).NotTo(HaveOccurred())
	dev := strings.TrimSpace(string(out))
	DeferCleanup(func() { _ = exec.Command("losetup", "-d", dev).Run() })
	return dev
}

// podEvents lists "Reason: message" of the events of a pod.
func podEvents(g Gomega, ns, name string) []string {
	events := &corev1.EventList{}
	g.Expect(k8s.List(context.Background(), events, client.InNamespace(ns))).To(Succeed())
	var out []string
	for _, e := range events.Items {
		if e.InvolvedObject.Kind == "Pod" && e.InvolvedObject.Name == name {
			out = append(out, e.Reason+": "+e.Message)
		}
	}
	return out
}

var _ = Describe("Persistent volumes on the real node", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	It("waits for an unbound claim, runs once a local volume is bound to it, and hands its data to the next pod", func() {
		ctx := context.Background()
		disk, err := os.MkdirTemp("", "nodelet-local-pv-")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { _ = os.RemoveAll(disk) })
		Expect(k8s.Create(ctx, claim(ns, "data"))).To(Succeed())
		create(shPod(ns, "writer", `echo written-by-writer > /data/note && sleep 3600`, withClaim("data", false)))

		// The claim is not bound: the pod waits in ContainerCreating and says why.
		Eventually(func(g Gomega) {
			g.Expect(podEvents(g, ns, "writer")).To(ContainElement(And(HavePrefix("FailedMount: Unable to attach or mount volumes: unmounted volumes=[data]"),
				ContainSubstring("error processing PVC "+ns+"/data: PVC is not bound"))))
		}, 30*time.Second).Should(Succeed())
		p := &corev1.Pod{}
		Eventually(func(g Gomega) { p = getPod(g, ns, "writer") }).Should(Succeed())
		Expect(p.Status.Phase).To(Equal(corev1.PodPending))

		pvName := "local-" + ns
		Expect(k8s.Create(ctx, persistentVolume(pvName, ns, "data", corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: disk}}))).To(Succeed())
		DeferCleanup(func() {
			_ = k8s.Delete(context.Background(), &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: pvName}})
		})
		bound := time.Now()
		Eventually(func(g Gomega) {
			p = getPod(g, ns, "writer")
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
			g.Expect(os.ReadFile(filepath.Join(disk, "note"))).To(Equal([]byte("written-by-writer\n")))
		}, 60*time.Second).Should(Succeed())
		report("local volume: pod Running and writing %.1fs after the volume was created", time.Since(bound).Seconds())
		// The kubelet's layout: the volume is bind-mounted at <root>/pods/<uid>/volumes/kubernetes.io~local-volume/<pv>.
		Expect(mountPointsOf(string(p.UID))).To(ContainElement(HaveSuffix("/pods/" + string(p.UID) + "/volumes/kubernetes.io~local-volume/" + pvName)))

		Expect(k8s.Delete(ctx, p)).To(Succeed())
		waitGone(ns, "writer", 60*time.Second)
		Eventually(func() []string { return mountPointsOf(string(p.UID)) }).Should(BeEmpty())
		Expect(os.ReadFile(filepath.Join(disk, "note"))).To(Equal([]byte("written-by-writer\n")), "the volume's data outlives the pod")

		// The next pod mounts the same claim read-only: it reads the note and cannot write.
		create(shPod(ns, "reader", `cat /data/note; touch /data/other 2>&1 || true; sleep 3600`, withClaim("data", true)))
		Eventually(func(g Gomega) {
			r := getPod(g, ns, "reader")
			g.Expect(r.Status.Phase).To(Equal(corev1.PodRunning))
			log := containerLog(r, "main", 0)
			g.Expect(log).To(ContainSubstring("written-by-writer"))
			g.Expect(log).To(ContainSubstring("Read-only file system"))
		}, 60*time.Second).Should(Succeed())
	})

	It("mounts a hostPath volume of a claim, creating its directory", func() {
		ctx := context.Background()
		parent, err := os.MkdirTemp("", "nodelet-hostpath-pv-")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { _ = os.RemoveAll(parent) })
		dir := filepath.Join(parent, "made")
		pvName := "hostpath-" + ns
		Expect(k8s.Create(ctx, persistentVolume(pvName, ns, "data", corev1.PersistentVolumeSource{
			HostPath: &corev1.HostPathVolumeSource{Path: dir, Type: new(corev1.HostPathDirectoryOrCreate)}}))).To(Succeed())
		DeferCleanup(func() {
			_ = k8s.Delete(context.Background(), &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: pvName}})
		})
		Expect(k8s.Create(ctx, claim(ns, "data"))).To(Succeed())
		create(shPod(ns, "hp", `echo from-hostpath > /data/note && sleep 3600`, withClaim("data", false)))
		Eventually(func(g Gomega) {
			g.Expect(getPod(g, ns, "hp").Status.Phase).To(Equal(corev1.PodRunning))
			g.Expect(os.ReadFile(filepath.Join(dir, "note"))).To(Equal([]byte("from-hostpath\n")))
		}, 60*time.Second).Should(Succeed())
	})

	It("gives a container a local block volume as a device, and leaves its data on the device", func() {
		ctx := context.Background()
		dev := loopDevice(16 << 20)

		pvName := "block-" + ns
		pv := persistentVolume(pvName, ns, "data", corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: dev}})
		pv.Spec.VolumeMode = new(corev1.PersistentVolumeBlock)
		Expect(k8s.Create(ctx, pv)).To(Succeed())
		DeferCleanup(func() {
			_ = k8s.Delete(context.Background(), &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: pvName}})
		})
		c := claim(ns, "data")
		c.Spec.VolumeMode = new(corev1.PersistentVolumeBlock)
		Expect(k8s.Create(ctx, c)).To(Succeed())
		p := create(shPod(ns, "raw", `echo written-to-the-device | dd of=/dev/xvda bs=512 count=1 conv=sync 2>/dev/null; dd if=/dev/xvda bs=512 count=1 2>/dev/null | head -c 22; echo; sleep 3600`,
			func(p *corev1.Pod) {
				p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
					PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}
				p.Spec.Containers[0].VolumeDevices = []corev1.VolumeDevice{{Name: "data", DevicePath: "/dev/xvda"}}
			}))
		Eventually(func(g Gomega) {
			p = getPod(g, ns, "raw")
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
			g.Expect(containerLog(p, "main", 0)).To(ContainSubstring("written-to-the-device"))
		}, 60*time.Second).Should(Succeed())
		Expect(k8s.Delete(ctx, p)).To(Succeed())
		waitGone(ns, "raw", 60*time.Second)
		head := make([]byte, 21)
		f, err := os.Open(dev)
		Expect(err).NotTo(HaveOccurred())
		defer func() { _ = f.Close() }()
		_, err = io.ReadFull(f, head)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(head)).To(Equal("written-to-the-device"))
	})

	It("formats and mounts a local volume on a block device for a filesystem claim", func() {
		ctx := context.Background()
		dev := loopDevice(32 << 20)
		pvName := "blockfs-" + ns
		Expect(k8s.Create(ctx, persistentVolume(pvName, ns, "data", corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: dev}}))).To(Succeed())
		DeferCleanup(func() {
			_ = k8s.Delete(context.Background(), &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: pvName}})
		})
		Expect(k8s.Create(ctx, claim(ns, "data"))).To(Succeed())
		p := create(shPod(ns, "fs", `echo on-ext4 > /data/note && grep " /data " /proc/mounts; sleep 3600`, withClaim("data", false)))
		Eventually(func(g Gomega) {
			p = getPod(g, ns, "fs")
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
			g.Expect(containerLog(p, "main", 0)).To(ContainSubstring("ext4"))
		}, 60*time.Second).Should(Succeed())
		Expect(mountPointsOf("local-volume/mounts/" + pvName)).To(HaveLen(1))
		Expect(k8s.Delete(ctx, p)).To(Succeed())
		waitGone(ns, "fs", 60*time.Second)
		Eventually(func() []string { return mountPointsOf("local-volume/mounts/" + pvName) }).Should(BeEmpty())
	})
})
