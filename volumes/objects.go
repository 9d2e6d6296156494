package volumes

import (
	"context"
	"errors"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CachedObjects is the Objects nodelet uses: a GET by name for each Secret and ConfigMap a pod
// references, kept TTL per object (the kubelet's cache-based change detection), and TokenRequests.
// It never lists or watches, so it needs only what the Node authorizer grants a node. Errors are not
// cached: an object that appears is seen at the next call. It is safe for concurrent use.
type CachedObjects struct {
	// Reader reads straight from the API server (a manager's GetAPIReader(), not its cached client:
	// that would start a cluster-wide informer).
	Reader client.Reader
	// Tokens creates the serviceaccounts/token subresource (a manager's GetClient()).
	Tokens client.SubResourceClientConstructor
	// Status patches claims' status (a manager's GetClient()); nil: PatchClaimStatus fails.
	Status client.StatusClient
	// Drivers reads CSIDrivers from a watch-fed cache (a manager's GetClient(); the Node authorizer lets a
	// node list and watch them), as the kubelet's CSIDriver lister: a changed podInfoOnMount, fsGroupPolicy
	// or requiresRepublish is seen at the next mount. nil: CSIDrivers are read by name and kept TTL.
	Drivers client.Reader
	// TrustBundles reads ClusterTrustBundles from a watch-fed cache (a manager's GetClient(): the Node
	// authorizer lets a node list and watch them), started by the first projection that asks for one, as the
	// kubelet's lazy informer. nil: clusterTrustBundle projections fail.
	TrustBundles client.Reader
	Clock        clock.Clock
	// TTL is how long a fetched object is used before it is read again; 0 reads it on every call.
	TTL time.Duration

	mu      sync.Mutex
	entries map[cacheKey]cacheEntry
}

type cacheKey struct {
	kind string
	types.NamespacedName
}

type cacheEntry struct {
	obj     client.Object
	fetched time.Time
}

// GetConfigMap returns the ConfigMap namespace/name; a missing one is a NotFound error reading
// `configmap "<name>" not found`, as the kubelet's.
func (c *CachedObjects) GetConfigMap(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error) {
	obj, err := c.get(ctx, "configmap", namespace, name, &corev1.ConfigMap{})
	if err != nil {
		return nil, err
	}
	return obj.(*corev1.ConfigMap), nil
}

// GetSecret returns the Secret namespace/name; a missing one is a NotFound error reading
// `secret "<name>" not found`.
func (c *CachedObjects) GetSecret(ctx context.Context, namespace, name string) (*corev1.Secret, error) {
	obj, err := c.get(ctx, "secret", namespace, name, &corev1.Secret{})
	if err != nil {
		return nil, err
	}
	return obj.(*corev1.Secret), nil
}

// CreateToken requests a token for the service account namespace/serviceAccount (never cached: the
// Manager keeps and refreshes tokens).
func (c *CachedObjects) CreateToken(ctx context.Context, namespace, serviceAccount string, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: serviceAccount}}
	out := req.DeepCopy()
	if err := c.Tokens.SubResource("token").Create(ctx, sa, out); err != nil {
		return nil, err
	}
	return out, nil
}

// GetPersistentVolumeClaim reads the claim namespace/name, never from the cache: a claim a pod waits
// for is seen as soon as it is bound.
func (c *CachedObjects) GetPersistentVolumeClaim(ctx context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	pvc := &corev1.PersistentVolumeClaim{}
	if err := c.Reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, pvc); err != nil {
		return nil, err
	}
	return pvc, nil
}

// GetPersistentVolume reads the PersistentVolume name, never from the cache.
func (c *CachedObjects) GetPersistentVolume(ctx context.Context, name string) (*corev1.PersistentVolume, error) {
	pv := &corev1.PersistentVolume{}
	if err := c.Reader.Get(ctx, types.NamespacedName{Name: name}, pv); err != nil {
		return nil, err
	}
	return pv, nil
}

// GetCSIDriver returns the CSIDriver name from Drivers, else read by name and kept TTL as Secrets and
// ConfigMaps are.
func (c *CachedObjects) GetCSIDriver(ctx context.Context, name string) (*storagev1.CSIDriver, error) {
	if c.Drivers != nil {
		d := &storagev1.CSIDriver{}
		if err := c.Drivers.Get(ctx, types.NamespacedName{Name: name}, d); err != nil {
			return nil, err
		}
		return d, nil
	}
	obj, err := c.get(ctx, "csidriver", "", name, &storagev1.CSIDriver{})
	if err != nil {
		return nil, err
	}
	return obj.(*storagev1.CSIDriver), nil
}

// GetVolumeAttachment reads the VolumeAttachment name, never from the cache: a volume waits for it to
// be attached.
func (c *CachedObjects) GetVolumeAttachment(ctx context.Context, name string) (*storagev1.VolumeAttachment, error) {
	va := &storagev1.VolumeAttachment{}
	if err := c.Reader.Get(ctx, types.NamespacedName{Name: name}, va); err != nil {
		return nil, err
	}
	return va, nil
}

// PatchClaimStatus patches the claim's status from old to updated (a strategic merge patch that fails on a
// newer claim, as the kubelet's) and leaves the claim the API server returned in updated, so that a next patch
// from it is made against the version this one wrote.
func (c *CachedObjects) PatchClaimStatus(ctx context.Context, old, updated *corev1.PersistentVolumeClaim) error {
	if c.Status == nil {
		return errors.New("no client to patch claim status with")
	}
	return c.Status.Status().Patch(ctx, updated, client.StrategicMergeFrom(old, client.MergeFromWithOptimisticLock{}))
}

// get returns a copy of the cached object if it is fresh, else reads it into obj and caches it.
func (c *CachedObjects) get(ctx context.Context, kind, namespace, name string, obj client.Object) (client.Object, error) {
	key := cacheKey{kind: kind, NamespacedName: types.NamespacedName{Namespace: namespace, Name: name}}
	if cached, ok := c.fresh(key); ok {
		return cached, nil
	}
	if err := c.Reader.Get(ctx, key.NamespacedName, obj); err != nil {
		c.drop(key)
		if apierrors.IsNotFound(err) {
			return nil, apierrors.NewNotFound(schema.GroupResource{Resource: kind}, name)
		}
		return nil, err
	}
	c.store(key, obj)
	return obj, nil
}

func (c *CachedObjects) fresh(key cacheKey) (client.Object, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	for k, e := range c.entries {
		if now.Sub(e.fetched) >= c.TTL {
			delete(c.entries, k) // stale entries are never used again: no cache grows with old objects
		}
	}
	e, ok := c.entries[key]
	if !ok {
		return nil, false
	}
	return e.obj.DeepCopyObject().(client.Object), true
}

func (c *CachedObjects) store(key cacheKey, obj client.Object) {
	if c.TTL <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = map[cacheKey]cacheEntry{}
	}
	c.entries[key] = cacheEntry{obj: obj.DeepCopyObject().(client.Object), fetched: c.now()}
}

func (c *CachedObjects) drop(key cacheKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, key)
}

func (c *CachedObjects) now() time.Time {
	if c.Clock == nil {
		return time.Now()
	}
	return c.Clock.Now()
}
