package volumes

import (
	"context"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// countingClient is a fake API client that counts GETs and fails LISTs (a node may not list).
func countingClient(t *testing.T, gets *int, objs ...client.Object) client.Client {
	t.Helper()
	return fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(objs...).
		WithInterceptorFuncs(interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				*gets++
				return c.Get(ctx, key, obj, opts...)
			},
			List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
				t.Error("CachedObjects listed objects")
				return nil
			},
		}).Build()
}

func TestCachedObjects(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cfg"}, Data: map[string]string{"k": "v1"}}
	var gets int
	c := countingClient(t, &gets, cm)
	clk := clocktesting.NewFakeClock(testStart)
	objects := &CachedObjects{Reader: c, Tokens: c, Clock: clk, TTL: 10 * time.Second}
	ctx := context.Background()

	got, err := objects.GetConfigMap(ctx, "ns", "cfg")
	if err != nil || got.Data["k"] != "v1" || gets != 1 {
		t.Fatalf("first get: %v, %v, gets=%d", got, err, gets)
	}
	got.Data["k"] = "mutated by a caller"
	if again, _ := objects.GetConfigMap(ctx, "ns", "cfg"); again.Data["k"] != "v1" || gets != 1 {
		t.Errorf("cached get: %v, gets=%d; want the cached copy, unchanged", again.Data, gets)
	}

	cm.Data["k"] = "v2"
	if err := c.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	clk.Step(10 * time.Second)
	if got, _ := objects.GetConfigMap(ctx, "ns", "cfg"); got.Data["k"] != "v2" || gets != 2 {
		t.Errorf("after the TTL: %v, gets=%d; want a new GET", got.Data, gets)
	}

	_, err = objects.GetSecret(ctx, "ns", "missing")
	if !apierrors.IsNotFound(err) || err.Error() != `secret "missing" not found` {
		t.Errorf("missing secret: %v", err)
	}
	_, err = objects.GetConfigMap(ctx, "ns", "missing")
	if !apierrors.IsNotFound(err) || err.Error() != `configmap "missing" not found` {
		t.Errorf("missing configmap: %v", err)
	}
	before := gets
	_, _ = objects.GetConfigMap(ctx, "ns", "missing")
	if gets != before+1 {
		t.Error("a NotFound was cached")
	}
}

func TestCachedObjectsWithoutTTL(t *testing.T) {
	var gets int
	c := countingClient(t, &gets, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"}})
	objects := &CachedObjects{Reader: c, Tokens: c}
	for range 3 {
		if _, err := objects.GetSecret(context.Background(), "ns", "s"); err != nil {
			t.Fatal(err)
		}
	}
	if gets != 3 {
		t.Errorf("gets = %d, want one per call", gets)
	}
}

func TestCachedObjectsCreateToken(t *testing.T) {
	var gets int
	c := countingClient(t, &gets, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "app"}})
	objects := &CachedObjects{Reader: c, Tokens: c}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: []string{"a"}}}
	tr, err := objects.CreateToken(context.Background(), "ns", "app", req)
	if err != nil || tr.Status.Token == "" {
		t.Fatalf("token: %v, %v", tr, err)
	}
	if req.Status.Token != "" {
		t.Error("the request was modified")
	}
}

// With Drivers (a watch-fed cache), a CSIDriver is read from it on every call: a changed podInfoOnMount is
// seen at the next mount, not after the TTL.
func TestCachedObjectsReadCSIDriversFromTheirCache(t *testing.T) {
	var gets, driverGets int
	api := countingClient(t, &gets)
	drivers := countingClient(t, &driverGets, &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: "mock"},
		Spec: storagev1.CSIDriverSpec{PodInfoOnMount: ptr.To(false)}})
	objects := &CachedObjects{Reader: api, Tokens: api, Drivers: drivers, Clock: clocktesting.NewFakeClock(testStart), TTL: time.Hour}
	ctx := context.Background()
	d, err := objects.GetCSIDriver(ctx, "mock")
	if err != nil || *d.Spec.PodInfoOnMount {
		t.Fatalf("first read: %v, %v", d, err)
	}
	d.Spec.PodInfoOnMount = ptr.To(true)
	if err := drivers.Update(ctx, d); err != nil {
		t.Fatal(err)
	}
	if d, err := objects.GetCSIDriver(ctx, "mock"); err != nil || !*d.Spec.PodInfoOnMount {
		t.Errorf("after the update: %v, %v; want podInfoOnMount true at once", d, err)
	}
	if _, err := objects.GetCSIDriver(ctx, "gone"); !apierrors.IsNotFound(err) {
		t.Errorf("missing driver: %v, want NotFound", err)
	}
	if gets != 0 || driverGets != 3 {
		t.Errorf("API GETs %d, cache reads %d; want 0 and one per call", gets, driverGets)
	}
}

// Two status patches in a row, the second made from the first's result (node expansion: in progress, then done),
// both land: the first leaves the written version in its object.
func TestPatchClaimStatusTwiceInARow(t *testing.T) {
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "data"}}
	c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(pvc).
		WithStatusSubresource(&corev1.PersistentVolumeClaim{}).Build()
	objects := &CachedObjects{Reader: c, Tokens: c, Status: c}
	ctx := context.Background()
	read := &corev1.PersistentVolumeClaim{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(pvc), read); err != nil {
		t.Fatal(err)
	}
	inProgress := read.DeepCopy()
	inProgress.Status.AllocatedResourceStatuses = map[corev1.ResourceName]corev1.ClaimResourceStatus{
		corev1.ResourceStorage: corev1.PersistentVolumeClaimNodeResizeInProgress}
	if err := objects.PatchClaimStatus(ctx, read, inProgress); err != nil {
		t.Fatal(err)
	}
	done := inProgress.DeepCopy()
	done.Status.AllocatedResourceStatuses = nil
	done.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")}
	if err := objects.PatchClaimStatus(ctx, inProgress, done); err != nil {
		t.Fatalf("second patch: %v", err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(pvc), read); err != nil {
		t.Fatal(err)
	}
	if got := read.Status.Capacity[corev1.ResourceStorage]; got.String() != "2Gi" || read.Status.AllocatedResourceStatuses != nil {
		t.Errorf("claim status %+v", read.Status)
	}
}
