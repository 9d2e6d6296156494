package e2e

import (
	"context"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// imageGCDropIn makes the first image garbage collection after a restart collect. Any real filesystem is
// at least 1% used, so usage is above the high threshold, and freeing down to 0% can never succeed
// (FreeDiskSpaceFailed). The pass runs right after the start-up detection (both as soon as the runtime
// answers), so an image seen by that detection is already past a 1ns minimum age; imageMinimumGCAge 0
// would be defaulted to 2m, as by the kubelet. The kubelet's ImageGCPeriod (5 minutes) has no setting:
// the spec relies on the pass at start.
const imageGCDropIn = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
imageGCHighThresholdPercent: 1
imageGCLowThresholdPercent: 0
imageMinimumGCAge: 1ns
`

// bedRegistry is the test bed's registry; containerd pulls from it over plain HTTP.
const bedRegistry = "127.0.0.1:5050"

// pushUniqueImage pushes a one-layer image of random content (an image ID no other spec has) to the bed's
// registry and returns its reference.
func pushUniqueImage() string {
	img, err := random.Image(4096, 1)
	Expect(err).NotTo(HaveOccurred())
	cf, err := img.ConfigFile()
	Expect(err).NotTo(HaveOccurred())
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", goruntime.GOARCH // containerd matches the platform
	cf.Config.Cmd = []string{"/nothing-to-run"}
	img, err = mutate.ConfigFile(img, cf)
	Expect(err).NotTo(HaveOccurred())
	ref := bedRegistry + "/e2e/imagegc:" + utilrand.String(8)
	r, err := name.ParseReference(ref, name.Insecure)
	Expect(err).NotTo(HaveOccurred())
	Expect(remote.Write(r, img)).To(Succeed())
	return ref
}

var _ = Describe("Image garbage collection on the real node", Ordered, func() {
	It("removes an unused image past the thresholds, keeps the running pod's and pinned ones, and reports FreeDiskSpaceFailed", func() {
		ctx := context.Background()
		ns := newNamespace()
		keeper := create(shPod(ns, "keeper", "sleep 3600"))
		var keptImage string // the running container's image, as the runtime names it
		Eventually(func(g Gomega) {
			for _, c := range runtimeContainers(keeper.UID) {
				if c.GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING {
					keptImage = c.GetImageId()
					if keptImage == "" {
						keptImage = c.GetImageRef()
					}
				}
			}
			g.Expect(keptImage).NotTo(BeEmpty(), "the keeper's container is not running")
		}, 60*time.Second).Should(Succeed())

		victim := pushUniqueImage()
		victimID, err := cri.PullImage(ctx, &runtimeapi.ImageSpec{Image: victim}, nil, nil)
		Expect(err).NotTo(HaveOccurred())
		images, err := cri.ListImages(ctx, nil)
		Expect(err).NotTo(HaveOccurred())
		var pinned []string
		for _, img := range images {
			if img.GetPinned() {
				pinned = append(pinned, img.GetId())
			}
		}
		collectedBefore := imagesCollected()

		dir := filepath.Join(bedDir, "imagegc.conf.d")
		Expect(os.MkdirAll(dir, 0o755)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(dir, "10-imagegc.conf"), []byte(imageGCDropIn), 0o644)).To(Succeed())
		restarted := time.Now()
		restartNodelet("NODELET_EXTRA_ARGS=--config-dir " + dir)
		DeferCleanup(func() { restartNodelet() })

		By("removing the unused image at the first pass")
		Eventually(func(g Gomega) {
			img, err := cri.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: victimID})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(img).To(BeNil(), "%s is still on the node", victim)
		}, 60*time.Second, time.Second).Should(Succeed())
		report("image GC: unused image removed %.1fs after the restart began", time.Since(restarted).Seconds())

		after, err := cri.ListImages(ctx, nil)
		Expect(err).NotTo(HaveOccurred())
		report("image GC: %d images before the pass, %d after (unused %s removed; the running pod's image and %d pinned kept)",
			len(images), len(after), victim, len(pinned))
		By("keeping the image of the running pod, and the pinned images")
		for _, id := range append([]string{keptImage}, pinned...) {
			img, err := cri.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: id})
			Expect(err).NotTo(HaveOccurred())
			Expect(img).NotTo(BeNil(), "image %s was removed", id)
		}
		p := &corev1.Pod{}
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(keeper), p)).To(Succeed())
		Expect(p.Status.ContainerStatuses).To(HaveLen(1))
		Expect(p.Status.ContainerStatuses[0].State.Running).NotTo(BeNil())
		Expect(p.Status.ContainerStatuses[0].RestartCount).To(BeZero())

		By("recording FreeDiskSpaceFailed on the Node: nothing frees the disk down to 0%")
		Eventually(func(g Gomega) {
			events := &corev1.EventList{}
			g.Expect(k8s.List(ctx, events, client.InNamespace(corev1.NamespaceDefault))).To(Succeed())
			var found bool
			for _, e := range events.Items {
				if e.InvolvedObject.Kind == "Node" && e.InvolvedObject.Name == nodeName && e.Reason == "FreeDiskSpaceFailed" &&
					e.Type == corev1.EventTypeWarning && e.LastTimestamp.After(restarted.Add(-time.Second)) {
					g.Expect(e.Message).To(HavePrefix("Insufficient free disk space on the node's image filesystem ("))
					g.Expect(e.Message).To(ContainSubstring("Failed to free sufficient space by deleting unused images (freed "))
					found = true
				}
			}
			g.Expect(found).To(BeTrue(), "no FreeDiskSpaceFailed event on the Node since the restart")
		}, 30*time.Second).Should(Succeed())

		By("counting the removal in kubelet_image_garbage_collected_total")
		// The counter starts again with the process: any value counts removals since the restart.
		Expect(imagesCollected()).To(BeNumerically(">=", 1), "before the restart: %v", collectedBefore)
	})
})

// imagesCollected is kubelet_image_garbage_collected_total{reason="space"} on the node API's /metrics
// (0 when not yet counted).
func imagesCollected() float64 {
	return nodeMetric(`kubelet_image_garbage_collected_total{reason="space"}`)
}

// nodeMetric is the value of one series (name and labels as /metrics prints them) on the node API's
// /metrics, 0 when absent.
func nodeMetric(series string) float64 {
	code, body := nodeGet("/metrics")
	Expect(code).To(Equal(200))
	for line := range strings.Lines(body) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			Expect(err).NotTo(HaveOccurred())
			return f
		}
	}
	return 0
}
