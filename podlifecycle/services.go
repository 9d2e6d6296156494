package podlifecycle

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// APIServices reads the cluster's Services from the manager's cache: the Node authorizer lets a node list
// and watch them cluster-wide, and the kubelet keeps an informer on all of them for environment variables
// (CacheOptions leaves headless ones out).
type APIServices struct {
	informer cache.Informer
	reader   client.Reader
}

// NewAPIServices registers the Service informer on c, without waiting: it starts and syncs with the cache.
func NewAPIServices(ctx context.Context, c cache.Cache) (*APIServices, error) {
	informer, err := c.GetInformer(ctx, &corev1.Service{}, cache.BlockUntilSynced(false))
	if err != nil {
		return nil, fmt.Errorf("service informer: %w", err)
	}
	return &APIServices{informer: informer, reader: c}, nil
}

// HasSynced tells whether the informer has listed the Services once.
func (s *APIServices) HasSynced() bool { return s.informer.HasSynced() }

// ListServices lists the cached Services.
func (s *APIServices) ListServices(ctx context.Context) ([]corev1.Service, error) {
	var list corev1.ServiceList
	if err := s.reader.List(ctx, &list); err != nil {
		return nil, err
	}
	return list.Items, nil
}
