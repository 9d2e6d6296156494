package statusmanager

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func podAt(rv string, phase corev1.PodPhase) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u", ResourceVersion: rv}, Status: corev1.PodStatus{Phase: phase}}
}

// Two writes in flight: the cache may show the version the first one made while the second one (computed
// against the version before) already landed. The base is then the last status sent, not the cached
// version's: taking the cached one would leave out of the next patch a change the second write made (it
// left a pod's AllContainersRestarting condition true for good, the cache showing False).
func TestStatusBaseWithTwoWritesInFlight(t *testing.T) {
	first := &corev1.PodStatus{Phase: corev1.PodPending}
	second := &corev1.PodStatus{Phase: corev1.PodRunning}
	var w *statusWrite
	w = w.next("u", "10", "11", first)
	w = w.next("u", "10", "12", second) // computed against 10 again: the cache had not seen 11
	for _, rv := range []string{"10", "11", "12"} {
		if got := w.base(podAt(rv, corev1.PodPending)); got != second {
			t.Errorf("base at version %s = %v, want the last status sent", rv, got)
		}
	}
	// A version the agent did not make nor compute against: someone else's write, taken as it is.
	if got := w.base(podAt("13", corev1.PodFailed)); got.Phase != corev1.PodFailed {
		t.Errorf("base at someone else's version = %v, want that version's status", got)
	}
	// Another object of the same name starts afresh.
	other := w.next("v", "20", "21", first)
	if len(other.versions) != 2 {
		t.Errorf("versions of a new object = %v, want only its own", other.versions)
	}
	for range 40 {
		w = w.next("u", "a", "b", second)
	}
	if len(w.versions) != maxKnownVersions {
		t.Errorf("%d versions kept, want at most %d", len(w.versions), maxKnownVersions)
	}
}
