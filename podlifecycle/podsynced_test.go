package podlifecycle

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// Until the pod cache has synced, admission and housekeeping do not read it (a read would wait for the
// sync, which cannot come while the API server is away, as when a control plane's static pods start):
// the API's pods are unknown at once. Once synced, the cache is read.
func TestAPIPodsDoNotWaitForAnUnsyncedCache(t *testing.T) {
	var lists int
	c := interceptor.NewClient(fake.NewClientBuilder().Build(), interceptor.Funcs{
		List: func(ctx context.Context, cl client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			lists++
			return cl.List(ctx, list, opts...)
		},
	})
	synced := false
	r := newTestReconciler(t, Deps{Client: c, Secrets: APIObjects{Reader: c},
		Node:       func(context.Context) (*corev1.Node, error) { return nil, errors.New("no node") },
		PodsSynced: func() bool { return synced }}, Options{})
	if pods, ok := r.apiPods(context.Background()); ok || pods != nil || lists != 0 {
		t.Fatalf("unsynced cache: pods %v, ok %v, %d lists; want none, false, no list", pods, ok, lists)
	}
	synced = true
	if _, ok := r.apiPods(context.Background()); !ok || lists != 1 {
		t.Fatalf("synced cache: ok %v, %d lists; want true after one list", ok, lists)
	}
}
