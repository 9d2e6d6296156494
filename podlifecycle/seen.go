package podlifecycle

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/podrules"
)

// firstSeen keeps when the agent first saw each API pod not yet synced, as the kubelet's pod config stamps
// config.seen on every pod it receives: the start of kubelet_pod_worker_start_duration_seconds and
// kubelet_pod_start_duration_seconds. A static pod carries that time in its config.seen annotation. An entry
// lives from the pod's arrival to its first sync or its deletion, whichever comes first.
type firstSeen struct {
	mu sync.Mutex
	at map[types.UID]time.Time
}

// note records now for pod unless it was seen before; mirror pods are never synced and not recorded.
func (s *firstSeen) note(pod *corev1.Pod, now time.Time) {
	if podrules.IsMirrorPod(pod) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.at == nil {
		s.at = map[types.UID]time.Time{}
	}
	if _, ok := s.at[pod.UID]; !ok {
		s.at[pod.UID] = now
	}
}

// forget drops what was recorded for uid.
func (s *firstSeen) forget(uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.at, uid)
}

// take returns when pod was first seen, and forgets it: the static source's config.seen for a static pod,
// else what note recorded; false when neither is known.
func (s *firstSeen) take(pod *corev1.Pod) (time.Time, bool) {
	s.mu.Lock()
	at, ok := s.at[pod.UID]
	delete(s.at, pod.UID)
	s.mu.Unlock()
	if v, has := pod.Annotations[podrules.ConfigSeenAnnotation]; has && podrules.IsStaticPod(pod) {
		if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
			return t, true
		}
	}
	return at, ok
}
