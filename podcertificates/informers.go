package podcertificates

import (
	"reflect"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers/internalinterfaces"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
)

// informerFactory is the part of client-go's shared informer factory the issuer's typed informers need:
// one informer per type, built on first use from the client (the list tweak is the typed informer's),
// started by Start. client-go's own factory links an informer for every type of every API group (its ForResource),
// which the node never watches.
type informerFactory struct {
	client kubernetes.Interface

	mu        sync.Mutex
	informers map[reflect.Type]toolscache.SharedIndexInformer
	started   map[reflect.Type]bool
}

var _ internalinterfaces.SharedInformerFactory = (*informerFactory)(nil)

func newInformerFactory(client kubernetes.Interface) *informerFactory {
	return &informerFactory{client: client,
		informers: map[reflect.Type]toolscache.SharedIndexInformer{}, started: map[reflect.Type]bool{}}
}

// InformerFor implements internalinterfaces.SharedInformerFactory: the type's informer, made once with no
// resync.
func (f *informerFactory) InformerFor(obj runtime.Object, newFunc internalinterfaces.NewInformerFunc) toolscache.SharedIndexInformer {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := reflect.TypeOf(obj)
	if inf, ok := f.informers[t]; ok {
		return inf
	}
	inf := newFunc(f.client, time.Duration(0))
	f.informers[t] = inf
	return inf
}

// Start implements internalinterfaces.SharedInformerFactory: it runs the informers not yet running until
// stop closes.
func (f *informerFactory) Start(stop <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for t, inf := range f.informers {
		if !f.started[t] {
			f.started[t] = true
			go inf.Run(stop)
		}
	}
}

// InformerName implements internalinterfaces.SharedInformerFactory: none, so the informers publish no
// metrics (client-go's factory without WithInformerName).
func (f *informerFactory) InformerName() *toolscache.InformerName { return nil }
