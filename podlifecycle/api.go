package podlifecycle

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// APIObjects reads Secrets and ConfigMaps by name straight from the API (no cache, no list/watch).
type APIObjects struct{ Reader client.Reader }

// GetConfigMap gets a ConfigMap by name.
func (a APIObjects) GetConfigMap(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error) {
	cm := &corev1.ConfigMap{}
	if err := a.Reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, cm); err != nil {
		return nil, err
	}
	return cm, nil
}

// GetSecret gets a Secret by name.
func (a APIObjects) GetSecret(ctx context.Context, namespace, name string) (*corev1.Secret, error) {
	s := &corev1.Secret{}
	if err := a.Reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, s); err != nil {
		return nil, err
	}
	return s, nil
}

// RuntimeHandler returns the CRI handler of a RuntimeClass, read by name.
func (a APIObjects) RuntimeHandler(ctx context.Context, name string) (string, error) {
	rc := &nodev1.RuntimeClass{}
	if err := a.Reader.Get(ctx, types.NamespacedName{Name: name}, rc); err != nil {
		return "", err
	}
	return rc.Handler, nil
}
