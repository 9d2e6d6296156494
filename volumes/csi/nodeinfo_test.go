package csi_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/volumes/csi"
)

const migrated = "kubernetes.io/aws-ebs,kubernetes.io/azure-disk,kubernetes.io/azure-file,kubernetes.io/cinder," +
	"kubernetes.io/gce-pd,kubernetes.io/portworx-volume,kubernetes.io/vsphere-volume"

const topologyKey = "topology.fake.example.com/node"

var _ = Describe("CSINode and the Node", func() {
	var (
		ctx      context.Context
		nodeName string
		kubelet  client.Client
		node     *corev1.Node
		root     string
	)

	BeforeEach(func() {
		ctx = context.Background()
		nodeName = "csi-" + utilrand.String(6)
		kubelet = nodeClient(nodeName)
		node = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName,
			Annotations: map[string]string{csi.AnnotationNodeID: `{"other.csi.example.com":"other-id"}`}}}
		Expect(kubelet.Create(ctx, node)).To(Succeed())
		root = tempDir(GinkgoT())
	})

	// start runs the node side of CSI as the agent does, writing with w (the kubelet's client by default).
	start := func(w client.Writer) {
		if w == nil {
			w = kubelet
		}
		m := csi.New(csi.Options{RootDir: root, NodeName: nodeName, Reader: kubelet, Writer: w})
		runCtx, cancel := context.WithCancel(ctrl.LoggerInto(ctx, GinkgoLogr))
		done := make(chan struct{})
		go func() {
			defer GinkgoRecover()
			defer close(done)
			Expect(m.Start(runCtx)).To(Succeed())
		}()
		DeferCleanup(func() { cancel(); <-done })
	}

	csiNode := func(g Gomega) *storagev1.CSINode {
		cn := &storagev1.CSINode{}
		g.Expect(admin.Get(ctx, client.ObjectKey{Name: nodeName}, cn)).To(Succeed())
		return cn
	}
	nodeIDs := func(g Gomega) map[string]string {
		n := &corev1.Node{}
		g.Expect(admin.Get(ctx, client.ObjectKey{Name: nodeName}, n)).To(Succeed())
		ids := map[string]string{}
		if v, ok := n.Annotations[csi.AnnotationNodeID]; ok {
			g.Expect(json.Unmarshal([]byte(v), &ids)).To(Succeed())
		}
		return ids
	}
	label := func(g Gomega) string {
		n := &corev1.Node{}
		g.Expect(admin.Get(ctx, client.ObjectKey{Name: nodeName}, n)).To(Succeed())
		return n.Labels[topologyKey]
	}
	plugin := func() *fakePlugin {
		p := newFakePlugin(GinkgoT(), root, driverName)
		p.nodeID, p.maxVols, p.topology = "fake-"+nodeName, 5, map[string]string{topologyKey: nodeName}
		return p
	}
	regSocket := filepath.Join(csi.RegistrationDir, driverName+"-reg.sock")

	It("makes the CSINode at start, owned by the Node, with the migrated-plugins annotation", func() {
		start(nil)
		Eventually(func(g Gomega) {
			cn := csiNode(g)
			g.Expect(cn.OwnerReferences).To(Equal([]metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: nodeName, UID: node.UID}}))
			g.Expect(cn.Annotations).To(HaveKeyWithValue(corev1.MigratedPluginsAnnotationKey, migrated))
			g.Expect(cn.Spec.Drivers).To(BeEmpty())
		}).Should(Succeed())
	})

	It("replaces a CSINode owned by an older Node of the name", func() {
		stale := &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: nodeName, OwnerReferences: []metav1.OwnerReference{
			{APIVersion: "v1", Kind: "Node", Name: nodeName, UID: "0ld-uid"}}},
			Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{Name: "gone.csi.example.com", NodeID: "x"}}}}
		Expect(admin.Create(ctx, stale)).To(Succeed())
		start(nil)
		Eventually(func(g Gomega) {
			cn := csiNode(g)
			g.Expect(cn.UID).NotTo(Equal(stale.UID))
			g.Expect(cn.OwnerReferences).To(HaveLen(1))
			g.Expect(cn.OwnerReferences[0].UID).To(Equal(node.UID))
			g.Expect(cn.Spec.Drivers).To(BeEmpty())
		}).Should(Succeed())
	})

	It("writes a registered driver into the CSINode and the Node before telling the plugin, and takes it out when it goes", func() {
		start(nil)
		p := plugin()
		p.start(GinkgoT(), filepath.Join(root, regSocket))

		Eventually(p.lastStatus).ShouldNot(BeNil())
		Expect(p.lastStatus().PluginRegistered).To(BeTrue(), p.lastStatus().Error)
		// Told it is registered: the API server knows already.
		Expect(csiNode(Default).Spec.Drivers).To(Equal([]storagev1.CSINodeDriver{{Name: driverName, NodeID: "fake-" + nodeName,
			TopologyKeys: []string{topologyKey}, Allocatable: &storagev1.VolumeNodeResources{Count: ptr.To[int32](5)}}}))
		Expect(nodeIDs(Default)).To(Equal(map[string]string{driverName: "fake-" + nodeName, "other.csi.example.com": "other-id"}))
		Expect(label(Default)).To(Equal(nodeName))

		p.stop()
		Eventually(func(g Gomega) {
			g.Expect(csiNode(g).Spec.Drivers).To(BeEmpty())
			g.Expect(nodeIDs(g)).To(Equal(map[string]string{"other.csi.example.com": "other-id"}))
		}).Should(Succeed())
		Expect(label(Default)).To(Equal(nodeName), "topology labels stay, as the kubelet leaves them")
	})

	It("replaces the driver's entry when it registers again with another node ID and no volume limit", func() {
		start(nil)
		p := plugin()
		p.start(GinkgoT(), filepath.Join(root, regSocket))
		Eventually(func(g Gomega) { g.Expect(nodeIDs(g)).To(HaveKeyWithValue(driverName, "fake-"+nodeName)) }).Should(Succeed())

		p.stop()
		again := plugin()
		again.nodeID, again.maxVols = "again-"+nodeName, 0
		again.start(GinkgoT(), filepath.Join(root, regSocket))
		Eventually(func(g Gomega) {
			g.Expect(csiNode(g).Spec.Drivers).To(Equal([]storagev1.CSINodeDriver{{Name: driverName, NodeID: "again-" + nodeName,
				TopologyKeys: []string{topologyKey}}}))
			g.Expect(nodeIDs(g)).To(HaveKeyWithValue(driverName, "again-"+nodeName))
		}).Should(Succeed())
	})

	It("retries writes that conflict or fail until they succeed", func() {
		w := &failingWriter{Writer: kubelet}
		w.patchFailures.Store(3)
		w.updateFailures.Store(2)
		start(w)
		p := plugin()
		p.start(GinkgoT(), filepath.Join(root, regSocket))
		Eventually(p.lastStatus).ShouldNot(BeNil())
		Expect(p.lastStatus().PluginRegistered).To(BeTrue(), "a failed write does not refuse the driver: it is retried")
		Eventually(func(g Gomega) {
			g.Expect(csiNode(g).Spec.Drivers).To(HaveLen(1))
			g.Expect(nodeIDs(g)).To(HaveKeyWithValue(driverName, "fake-"+nodeName))
		}).Should(Succeed())
		Expect(w.patchFailures.Load()).To(BeNumerically("<=", 0))
		Expect(w.updateFailures.Load()).To(BeNumerically("<=", 0))
	})

	It("refuses a driver whose topology collides with a label of the Node", func() {
		node.Labels = map[string]string{topologyKey: "elsewhere"}
		Expect(kubelet.Update(ctx, node)).To(Succeed())
		start(nil)
		p := plugin()
		p.start(GinkgoT(), filepath.Join(root, regSocket))
		Eventually(p.lastStatus).ShouldNot(BeNil())
		Expect(p.lastStatus().PluginRegistered).To(BeFalse())
		Expect(p.lastStatus().Error).To(ContainSubstring(`detected topology value collision: driver reported "` + topologyKey + `":"` + nodeName +
			`" but existing label is "` + topologyKey + `":"elsewhere"`))
		Consistently(func(g Gomega) {
			g.Expect(nodeIDs(g)).NotTo(HaveKey(driverName))
			g.Expect(label(g)).To(Equal("elsewhere"))
		}).WithTimeout(time.Second).Should(Succeed())
		Expect(csiNode(Default).Spec.Drivers).To(BeEmpty())
	})
})

// failingWriter answers the first patches with a conflict and the first updates with an unavailable
// API server.
type failingWriter struct {
	client.Writer
	patchFailures, updateFailures atomic.Int32
}

func (w *failingWriter) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if w.patchFailures.Add(-1) >= 0 {
		return apierrors.NewConflict(schema.GroupResource{Resource: "nodes"}, obj.GetName(), nil)
	}
	return w.Writer.Patch(ctx, obj, patch, opts...)
}

func (w *failingWriter) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	if w.updateFailures.Add(-1) >= 0 {
		return apierrors.NewServiceUnavailable("the API server is away")
	}
	return w.Writer.Update(ctx, obj, opts...)
}
