package probes_test

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/nodelet/nodelet/probes"
)

// The reconciler owns one Manager: it syncs each running pod, reads the answers when it computes actions
// and status, and turns OnChange into reconcile requests.
func ExampleManager() {
	m := &probes.Manager{
		Clock:    clock.RealClock{},
		OnChange: func(key types.NamespacedName) { /* enqueue key, without blocking */ },
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "1234"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}},
	}
	m.Sync(pod, []string{"10.88.0.5"}, []probes.ContainerInfo{{Name: "app", ID: "c1", StartedAt: time.Now(), Running: true}})

	fmt.Println(m.Ready("c1"))          // no readiness probe: ready while running
	fmt.Println(m.Started("c1"))        // no startup probe: started
	fmt.Println(m.LivenessFailed("c1")) // nothing to restart
	fmt.Println(m.Ready("other"))       // never synced: not known
	m.RemovePod(pod.UID)
	// Output:
	// true true
	// true true
	// false  <nil>
	// false false
}
