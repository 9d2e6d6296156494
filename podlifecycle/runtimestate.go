package podlifecycle

import (
	"context"

	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/runtime"
)

// readPod returns the pod's runtime state: the PLEG cache's while the runtime agrees with it, else one
// read of the runtime, which the cache keeps. gen is the generation the state belongs to, for keep.
func (r *Reconciler) readPod(ctx context.Context, uid types.UID, name, namespace string) (*runtime.PodStatus, uint64, error) {
	if st, gen, ok := r.states.Get(uid); ok {
		r.metrics.podStateReads.WithLabelValues("cache").Inc()
		st.Name, st.Namespace = name, namespace
		return st, gen, nil
	}
	gen := r.states.Begin(uid)
	st, err := r.cri.GetPodStatus(ctx, uid, name, namespace)
	if err != nil {
		return nil, 0, err
	}
	r.metrics.podStateReads.WithLabelValues("runtime").Inc()
	r.states.Put(uid, st, gen)
	return st, gen, nil
}

// keep records the pod's state as a sync's own actions left it (derived from the state of generation
// gen plus what the actions read back), so the next sync need not read the runtime.
func (r *Reconciler) keep(uid types.UID, st *runtime.PodStatus, gen uint64) {
	r.states.Put(uid, st, gen)
}

// changed marks the pod's cached state stale after an action whose outcome was not read back (a stop, a
// removal): the next sync reads the runtime.
func (r *Reconciler) changed(uid types.UID) {
	r.states.Invalidate(uid)
}
