package podlifecycle

import (
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/nodelet/nodelet/podrules"
)

// startingStatic is the static pod store as an agent start finds it: its file source finishes its first
// read while the reconciler looks a running static pod up (the PLEG's first relist comes before the
// manifests are read): that lookup misses, and the source is seen right after it.
type startingStatic struct {
	mu   sync.Mutex
	pod  *corev1.Pod
	seen bool
}

func (s *startingStatic) Get(key types.NamespacedName) (*corev1.Pod, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.seen {
		s.seen = true // the read ends during the lookup
		return nil, false
	}
	if key.Namespace == s.pod.Namespace && key.Name == s.pod.Name {
		return s.pod, true
	}
	return nil, false
}

func (s *startingStatic) List() []*corev1.Pod {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.seen {
		return nil
	}
	return []*corev1.Pod{s.pod}
}

func (s *startingStatic) Source() source.Source { return noSource }

func (s *startingStatic) SeenSources(...string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen
}

// An agent restart never stops a running static pod because the store was read while the pod was looked
// up: whether the sources were seen is taken before the lookup (a kubeadm control plane lost its API
// server, etcd and all, when the kubelet was restarted at the end of kubeadm init).
func TestRestartDuringTheFirstStaticReadKeepsStaticPods(t *testing.T) {
	b := newLifecycleBed(t)
	pod := bedPod("etcd", func(p *corev1.Pod) {
		p.Annotations = map[string]string{podrules.ConfigSourceAnnotation: "file"}
	})
	b.static = &startingStatic{pod: pod, seen: true}
	b.start()
	b.sync("etcd")
	b.sync("etcd")
	id := b.mustRun("etcd", "app")

	b.static = &startingStatic{pod: pod}
	b.start()
	b.sync("etcd")
	b.sync("etcd")
	if stops := b.calls("StopContainer", "StopPodSandbox"); len(stops) != 0 {
		t.Fatalf("the restarted agent stopped the static pod: %v", stops)
	}
	if got := b.mustRun("etcd", "app"); got != id {
		t.Fatalf("container %s replaced by %s", id, got)
	}
}
