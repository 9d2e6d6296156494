package podlifecycle

import (
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/nodelet/nodelet/podrules"
)

// staticStore is a static pod store whose manifests the test takes away and puts back.
type staticStore struct {
	mu   sync.Mutex
	pods map[types.NamespacedName]*corev1.Pod
}

func (s *staticStore) Get(key types.NamespacedName) (*corev1.Pod, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.pods[key]
	return p, ok
}

func (s *staticStore) List() []*corev1.Pod {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*corev1.Pod
	for _, p := range s.pods {
		out = append(out, p)
	}
	return out
}

func (s *staticStore) Source() source.Source      { return noSource }
func (s *staticStore) SeenSources(...string) bool { return true }

func (s *staticStore) put(p *corev1.Pod) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pods[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}] = p
}

func (s *staticStore) remove(p *corev1.Pod) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.pods, types.NamespacedName{Namespace: p.Namespace, Name: p.Name})
}

// startStatic starts the bed with pod its static pod store's one pod and its metrics registered, and syncs
// the pod twice (admission and start); it returns the store.
func (b *lifecycleBed) startStatic(pod *corev1.Pod) *staticStore {
	store := &staticStore{pods: map[types.NamespacedName]*corev1.Pod{}}
	store.put(pod)
	b.static = store
	b.start()
	b.r.RegisterMetrics(prometheus.NewRegistry())
	b.sync(pod.Name)
	b.sync(pod.Name)
	return store
}

// A static pod whose manifest is taken away and put back unchanged (the same UID: an editor's rename, a
// configuration tool rewriting the directory) while its containers stop runs again once they have stopped,
// as the kubelet restarts a desired pod whose worker had finished; kubelet_restarted_pods_total{static="true"}
// counts it.
func TestStaticPodPutBackWhileStoppingRunsAgain(t *testing.T) {
	b := newLifecycleBed(t)
	pod := bedPod("etcd", func(p *corev1.Pod) {
		p.Annotations = map[string]string{podrules.ConfigSourceAnnotation: "file"}
	})
	store := b.startStatic(pod)
	first := b.mustRun("etcd", "app")

	store.remove(pod)
	b.sync("etcd") // no longer desired: its stop begins
	store.put(pod)
	for i := 0; i < 10 && b.running("etcd", "app") == "" || b.running("etcd", "app") == first; i++ {
		b.waitKill("etcd")
		b.sync("etcd")
	}
	again := b.mustRun("etcd", "app")
	if again == first {
		t.Fatalf("the static pod's container %s was never stopped", first)
	}
	if got := testutil.ToFloat64(b.r.metrics.restartedPods.WithLabelValues("true")); got != 1 {
		t.Fatalf("kubelet_restarted_pods_total{static=\"true\"} = %v, want 1", got)
	}
	if n := len(b.calls("RunPodSandbox")); n != 2 {
		t.Fatalf("%d sandboxes run, want 2 (the first and the restart's)", n)
	}
}
