package podlifecycle

import (
	"context"
	"fmt"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/runtime"
)

// TestPodWorkersConcurrentAdmission runs the workers of many pods at once, as the controller's
// concurrent reconciles do: each worker is admitted (its admission reads every other worker's state),
// then terminates, while other goroutines keep reading the admitted pods. Under -race a worker state
// written without synchronisation while another pod's admission reads it fails the test.
func TestPodWorkersConcurrentAdmission(t *testing.T) {
	const pods, readers = 16, 4
	r := newTestReconciler(t, Deps{}, Options{})
	ctx := context.Background()

	done := make(chan struct{})
	var readWG sync.WaitGroup
	for range readers {
		readWG.Add(1)
		go func() {
			defer readWG.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				for _, p := range r.admittedPods("") {
					if p.Name == "" {
						t.Error("admittedPods returned a pod without a name")
					}
				}
			}
		}()
	}

	var workWG sync.WaitGroup
	for i := range pods {
		workWG.Add(1)
		go func() {
			defer workWG.Done()
			pod := racePod(i)
			w := r.workerFor(pod)
			if rejected := r.admitPod(ctx, w, pod, &runtime.PodStatus{}); rejected {
				t.Errorf("pod %s rejected", pod.Name)
				return
			}
			w.setState(terminating)
			w.setState(terminated)
		}()
	}
	workWG.Wait()
	close(done)
	readWG.Wait()

	if got := r.admittedPods(""); len(got) != 0 {
		t.Errorf("admittedPods after every pod terminated = %d pods, want 0", len(got))
	}
}

func racePod(i int) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("p%d", i), UID: types.UID(fmt.Sprintf("uid-%d", i))},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}
}
