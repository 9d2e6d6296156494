package csi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// AnnotationNodeID is the Node annotation holding a JSON object of driver name → this node's ID for the
// driver.
const AnnotationNodeID = "csi.volume.kubernetes.io/nodeid"

// migratedPlugins is the CSINode's storage.alpha.kubernetes.io/migrated-plugins annotation as the
// kubelet writes it: every in-tree plugin whose volumes CSI drivers now serve, sorted.
const migratedPlugins = "kubernetes.io/aws-ebs,kubernetes.io/azure-disk,kubernetes.io/azure-file,kubernetes.io/cinder," +
	"kubernetes.io/gce-pd,kubernetes.io/portworx-volume,kubernetes.io/vsphere-volume"

// initKey is the queue's key for the CSINode object itself (no driver name is empty).
const initKey = ""

// Retries of the API writes: from 50 ms, doubling, to two minutes, for as long as it takes. One try (the
// reads and writes of one driver) is given writeTimeout: an API server that does not answer holds up
// neither a registration nor the other drivers.
const (
	writeRetryBase = 50 * time.Millisecond
	writeRetryMax  = 2 * time.Minute
	writeTimeout   = 15 * time.Second
)

// DriverGetter is the registered drivers (Registry).
type DriverGetter interface {
	Get(name string) (Driver, bool)
}

// NodeInfo keeps, as the kubelet's node info manager, the CSINode object of this node and the CSI parts
// of its Node in line with the registered drivers: the CSINode exists, owned by the Node, with the
// migrated-plugins annotation; each registered driver has its entry there (node ID, topology keys, the
// volume limit as allocatable.count), its node ID in the Node's csi.volume.kubernetes.io/nodeid
// annotation and its topology as labels of the Node. A driver de-registered loses its entry and its
// annotation key; topology labels stay, as the kubelet leaves them. Writes that fail (a conflict, the
// API server away) are retried with a back-off until they succeed.
//
// Everything is read by name and written to objects named after the node, which the Node authorizer
// and NodeRestriction allow system:node:<name>.
type NodeInfo struct {
	// Reader reads the Node and the CSINode from the API server (not a cache: a node may not list
	// CSINodes, and writes need fresh objects).
	Reader client.Reader
	// Writer creates, updates, patches and deletes them.
	Writer   client.Writer
	NodeName string
	Drivers  DriverGetter

	mu    sync.Mutex // one write at a time
	queue workqueue.TypedRateLimitingInterface[string]
}

// NewNodeInfo returns the node info writer of nodeName, its retries timed by clk (nil: the real clock).
func NewNodeInfo(r client.Reader, w client.Writer, nodeName string, drivers DriverGetter, clk clock.WithTicker) *NodeInfo {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &NodeInfo{Reader: r, Writer: w, NodeName: nodeName, Drivers: drivers,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](writeRetryBase, writeRetryMax),
			workqueue.TypedRateLimitingQueueConfig[string]{Clock: clk})}
}

// Start makes or fixes the CSINode object, then writes what drivers change, until ctx ends.
func (n *NodeInfo) Start(ctx context.Context) error {
	ctx = logr.NewContext(ctx, logr.FromContextOrDiscard(ctx).WithName("csinode"))
	n.queue.Add(initKey)
	go func() {
		<-ctx.Done()
		n.queue.ShutDown()
	}()
	for n.next(ctx) {
	}
	return nil
}

// Enqueue has the driver's state written soon.
func (n *NodeInfo) Enqueue(driver string) { n.queue.Add(driver) }

// Sync writes the driver's state now. A failure that writing again cannot fix (a topology label the Node
// has with another value, an object the API server finds invalid) is returned; any other is logged and
// retried with a back-off.
func (n *NodeInfo) Sync(ctx context.Context, driver string) error {
	err := n.sync(ctx, driver)
	if err == nil || isPermanent(err) {
		return err
	}
	logr.FromContextOrDiscard(ctx).Error(err, "Writing a CSI driver into the CSINode object and the Node failed; retrying", "driver", driver)
	n.queue.AddRateLimited(driver)
	return nil
}

func (n *NodeInfo) next(ctx context.Context) bool {
	key, shutdown := n.queue.Get()
	if shutdown {
		return false
	}
	defer n.queue.Done(key)
	err := n.sync(ctx, key)
	switch {
	case err == nil:
		n.queue.Forget(key)
	case ctx.Err() != nil:
	case key == initKey:
		logr.FromContextOrDiscard(ctx).Error(err, "Initializing the CSINode object failed; retrying")
		n.queue.AddRateLimited(key)
	default:
		logr.FromContextOrDiscard(ctx).Error(err, "Writing a CSI driver into the CSINode object and the Node failed; retrying", "driver", key)
		n.queue.AddRateLimited(key)
	}
	return true
}

// sync writes the state of one driver (initKey: the CSINode object alone) as the registry has it now.
func (n *NodeInfo) sync(ctx context.Context, key string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	node := &corev1.Node{}
	if err := n.Reader.Get(ctx, client.ObjectKey{Name: n.NodeName}, node); err != nil {
		return fmt.Errorf("get node %s: %w", n.NodeName, err)
	}
	if key == initKey {
		_, err := n.ensureCSINode(ctx, node)
		return err
	}
	if d, ok := n.Drivers.Get(key); ok {
		return n.install(ctx, node, d)
	}
	return n.uninstall(ctx, node, key)
}

// install writes the driver's node ID and topology into the Node, then its entry into the CSINode.
func (n *NodeInfo) install(ctx context.Context, node *corev1.Node, d Driver) error {
	err := n.patchNode(ctx, node, func(nd *corev1.Node) (bool, error) {
		changed, err := setNodeID(nd, d.Name, d.NodeID)
		if err != nil {
			return false, err
		}
		labeled, err := setTopologyLabels(nd, d.Topology)
		return changed || labeled, err
	})
	if err != nil {
		return err
	}
	cn, err := n.ensureCSINode(ctx, node)
	if err != nil {
		return err
	}
	if !setDriver(ctx, cn, d) {
		return nil
	}
	return n.update(ctx, cn)
}

// uninstall removes the driver's entry from the CSINode, then its node ID from the Node.
func (n *NodeInfo) uninstall(ctx context.Context, node *corev1.Node, name string) error {
	cn := &storagev1.CSINode{}
	err := n.Reader.Get(ctx, client.ObjectKey{Name: n.NodeName}, cn)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("get CSINode %s: %w", n.NodeName, err)
	case removeDriver(cn, name):
		if err := n.update(ctx, cn); err != nil {
			return err
		}
	}
	return n.patchNode(ctx, node, func(nd *corev1.Node) (bool, error) { return removeNodeID(nd, name) })
}

// ensureCSINode returns the node's CSINode: made if missing, owned by this Node with the migrated-plugins
// annotation. One owned by another Node of the name (an older one, since deleted) is deleted, and the
// error says so: the next try makes it anew.
func (n *NodeInfo) ensureCSINode(ctx context.Context, node *corev1.Node) (*storagev1.CSINode, error) {
	cn := &storagev1.CSINode{}
	err := n.Reader.Get(ctx, client.ObjectKey{Name: n.NodeName}, cn)
	if apierrors.IsNotFound(err) {
		return n.createCSINode(ctx, node)
	}
	if err != nil {
		return nil, fmt.Errorf("get CSINode %s: %w", n.NodeName, err)
	}
	if owner, ok := ownedBy(cn, node); !ok {
		if err := n.Writer.Delete(ctx, cn, client.Preconditions{UID: &cn.UID}); err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("delete CSINode %s owned by another node (%s): %w", n.NodeName, owner, err)
		}
		return nil, fmt.Errorf("CSINode %q was owned by different node (oldNodeID=%q, newNodeID=%q), deleted it", n.NodeName, owner, node.UID)
	}
	if setMigrationAnnotation(cn) {
		if err := n.update(ctx, cn); err != nil {
			return nil, err
		}
	}
	return cn, nil
}

func (n *NodeInfo) createCSINode(ctx context.Context, node *corev1.Node) (*storagev1.CSINode, error) {
	cn := &storagev1.CSINode{
		ObjectMeta: metav1.ObjectMeta{Name: n.NodeName, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID,
		}}},
		Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{}},
	}
	setMigrationAnnotation(cn)
	if err := n.Writer.Create(ctx, cn); err != nil {
		return nil, permanentIfInvalid(fmt.Errorf("create CSINode %s: %w", n.NodeName, err))
	}
	logr.FromContextOrDiscard(ctx).Info("CSINode created", "csiNode", n.NodeName)
	return cn, nil
}

func (n *NodeInfo) update(ctx context.Context, cn *storagev1.CSINode) error {
	if err := n.Writer.Update(ctx, cn); err != nil {
		return permanentIfInvalid(fmt.Errorf("update CSINode %s: %w", n.NodeName, err))
	}
	return nil
}

// patchNode applies change to node and patches what it changed, if anything, failing on a conflict.
func (n *NodeInfo) patchNode(ctx context.Context, node *corev1.Node, change func(*corev1.Node) (bool, error)) error {
	orig := node.DeepCopy()
	changed, err := change(node)
	if err != nil || !changed {
		return err
	}
	if err := n.Writer.Patch(ctx, node, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return permanentIfInvalid(fmt.Errorf("patch node %s: %w", n.NodeName, err))
	}
	return nil
}

// ownedBy says whether the CSINode is owned by node (by name and UID), and the UID of the Node that owns
// it otherwise.
func ownedBy(cn *storagev1.CSINode, node *corev1.Node) (types.UID, bool) {
	var owner types.UID
	for _, ref := range cn.OwnerReferences {
		if ref.Kind != "Node" {
			continue
		}
		owner = ref.UID
		if ref.Name == node.Name && ref.UID == node.UID {
			return owner, true
		}
	}
	return owner, false
}

// setMigrationAnnotation sets the migrated-plugins annotation unless it names the same plugins already.
func setMigrationAnnotation(cn *storagev1.CSINode) bool {
	cur := strings.Split(cn.Annotations[corev1.MigratedPluginsAnnotationKey], ",")
	slices.Sort(cur)
	if strings.Join(slices.Compact(cur), ",") == migratedPlugins {
		return false
	}
	if cn.Annotations == nil {
		cn.Annotations = map[string]string{}
	}
	cn.Annotations[corev1.MigratedPluginsAnnotationKey] = migratedPlugins
	return true
}

// setDriver puts d's entry in the CSINode in place of any entry of its name; false if it is there as it
// should be.
func setDriver(ctx context.Context, cn *storagev1.CSINode, d Driver) bool {
	want := storagev1.CSINodeDriver{Name: d.Name, NodeID: d.NodeID, TopologyKeys: slices.Sorted(maps.Keys(d.Topology))}
	switch {
	case d.MaxVolumes > math.MaxInt32:
		logr.FromContextOrDiscard(ctx).Info("The driver's volume limit is above the API's maximum; truncated", "driver", d.Name, "maxVolumes", d.MaxVolumes)
		want.Allocatable = &storagev1.VolumeNodeResources{Count: ptr.To(int32(math.MaxInt32))}
	case d.MaxVolumes > 0:
		want.Allocatable = &storagev1.VolumeNodeResources{Count: ptr.To(int32(d.MaxVolumes))}
	case d.MaxVolumes < 0:
		logr.FromContextOrDiscard(ctx).Info("The driver's volume limit is negative; left out of the CSINode", "driver", d.Name, "maxVolumes", d.MaxVolumes)
	}
	drivers := make([]storagev1.CSINodeDriver, 0, len(cn.Spec.Drivers)+1)
	same := false
	for _, cur := range cn.Spec.Drivers {
		if cur.Name == d.Name {
			same = sameDriver(cur, want)
			continue
		}
		drivers = append(drivers, cur)
	}
	if same {
		return false
	}
	cn.Spec.Drivers = append(drivers, want)
	return true
}

func sameDriver(a, b storagev1.CSINodeDriver) bool {
	count := func(d storagev1.CSINodeDriver) int32 {
		if d.Allocatable == nil || d.Allocatable.Count == nil {
			return 0
		}
		return *d.Allocatable.Count
	}
	ak, bk := slices.Sorted(slices.Values(a.TopologyKeys)), slices.Sorted(slices.Values(b.TopologyKeys))
	return a.NodeID == b.NodeID && slices.Equal(ak, bk) && count(a) == count(b)
}

// removeDriver removes the entry of name from the CSINode; false if it has none.
func removeDriver(cn *storagev1.CSINode, name string) bool {
	n := len(cn.Spec.Drivers)
	cn.Spec.Drivers = slices.DeleteFunc(cn.Spec.Drivers, func(d storagev1.CSINodeDriver) bool { return d.Name == name })
	return len(cn.Spec.Drivers) != n
}

// nodeIDs reads the Node's csi.volume.kubernetes.io/nodeid annotation.
func nodeIDs(node *corev1.Node) (map[string]string, error) {
	ids := map[string]string{}
	v := node.Annotations[AnnotationNodeID]
	if v == "" {
		return ids, nil
	}
	if err := json.Unmarshal([]byte(v), &ids); err != nil {
		return nil, permanent(fmt.Errorf("failed to parse node's %q annotation value (%q) err=%w", AnnotationNodeID, v, err))
	}
	if ids == nil {
		ids = map[string]string{}
	}
	return ids, nil
}

// setNodeID puts driver → id in the Node's node ID annotation.
func setNodeID(node *corev1.Node, driver, id string) (bool, error) {
	ids, err := nodeIDs(node)
	if err != nil || ids[driver] == id {
		return false, err
	}
	ids[driver] = id
	return true, writeNodeIDs(node, ids)
}

// removeNodeID takes driver out of the Node's node ID annotation (the annotation goes with its last key).
func removeNodeID(node *corev1.Node, driver string) (bool, error) {
	ids, err := nodeIDs(node)
	if err != nil {
		return false, err
	}
	if _, ok := ids[driver]; !ok {
		return false, nil
	}
	delete(ids, driver)
	if len(ids) == 0 {
		delete(node.Annotations, AnnotationNodeID)
		return true, nil
	}
	return true, writeNodeIDs(node, ids)
}

func writeNodeIDs(node *corev1.Node, ids map[string]string) error {
	b, err := json.Marshal(ids)
	if err != nil {
		return err
	}
	if node.Annotations == nil {
		node.Annotations = map[string]string{}
	}
	node.Annotations[AnnotationNodeID] = string(b)
	return nil
}

// setTopologyLabels labels the Node with the driver's topology; a label the Node has with another value
// is a collision, which writing again cannot fix.
func setTopologyLabels(node *corev1.Node, topology map[string]string) (bool, error) {
	changed := false
	for _, k := range slices.Sorted(maps.Keys(topology)) {
		v := topology[k]
		cur, ok := node.Labels[k]
		if ok && cur != v {
			return false, permanent(fmt.Errorf("detected topology value collision: driver reported %q:%q but existing label is %q:%q", k, v, k, cur))
		}
		if ok {
			continue
		}
		if node.Labels == nil {
			node.Labels = map[string]string{}
		}
		node.Labels[k], changed = v, true
	}
	return changed, nil
}

// permanentError is a failure that writing again cannot fix.
type permanentError struct{ error }

func (e permanentError) Unwrap() error { return e.error }

func permanent(err error) error { return permanentError{err} }

func isPermanent(err error) bool {
	_, ok := errors.AsType[permanentError](err)
	return ok
}

// permanentIfInvalid marks the API server's refusal of an invalid object as permanent.
func permanentIfInvalid(err error) error {
	if apierrors.IsInvalid(err) {
		return permanent(err)
	}
	return err
}
