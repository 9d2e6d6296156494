package podsyncer

import (
	"context"

	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/runtime"
)

// ReadPod returns the pod's runtime state: the PLEG cache's while the runtime agrees with it, else one
// read of the runtime, which the cache keeps. gen is the generation the state belongs to, for keep.
func (s *Syncer) ReadPod(ctx context.Context, uid types.UID, name, namespace string) (*runtime.PodStatus, uint64, error) {
	if st, gen, ok := s.states.Get(uid); ok {
		s.metrics.podStateReads.WithLabelValues("cache").Inc()
		st.Name, st.Namespace = name, namespace
		return st, gen, nil
	}
	gen := s.states.Begin(uid)
	st, err := s.cri.GetPodStatus(ctx, uid, name, namespace)
	if err != nil {
		return nil, 0, err
	}
	s.metrics.podStateReads.WithLabelValues("runtime").Inc()
	s.states.Put(uid, st, gen)
	return st, gen, nil
}

// keep records the pod's state as a sync's own actions left it (derived from the state of generation
// gen plus what the actions read back), so the next sync need not read the runtime.
func (s *Syncer) keep(uid types.UID, st *runtime.PodStatus, gen uint64) {
	s.states.Put(uid, st, gen)
}

// changed marks the pod's cached state stale after an action whose outcome was not read back (a stop, a
// removal): the next sync reads the runtime.
func (s *Syncer) changed(uid types.UID) {
	s.states.Invalidate(uid)
}
