package podsyncer

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodelet/nodelet/statusmanager"
)

// testStart is when the fake clocks of the package's tests start.
var testStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// noRuntime is a runtime for tests that must not reach one: any call panics.
type noRuntime struct{ Runtime }

// newTestSyncer builds a syncer through New as the package's tests need it: what they leave out is a
// runtime that must not be called, a fake recorder, a fake clock at testStart, no node (standalone), a status
// cache of its own, no other admitted pod, node "node-1" and a temporary root directory.
func newTestSyncer(t testing.TB, deps Deps, opts Options) *Syncer {
	t.Helper()
	if deps.Runtime == nil {
		deps.Runtime = noRuntime{}
	}
	if deps.Recorder == nil {
		deps.Recorder = record.NewFakeRecorder(100)
	}
	if deps.Clock == nil {
		deps.Clock = clocktesting.NewFakeClock(testStart)
	}
	if deps.Node == nil {
		deps.Node = func(context.Context) (*corev1.Node, error) { return nil, errors.New("no API server") }
	}
	if deps.Statuses == nil {
		deps.Statuses = statusmanager.New(nil)
	}
	if deps.Enqueue == nil {
		deps.Enqueue = func(types.NamespacedName) {}
	}
	if deps.AdmittedPods == nil {
		deps.AdmittedPods = func(types.UID) []*corev1.Pod { return nil }
	}
	if opts.NodeName == "" {
		opts.NodeName = "node-1"
	}
	if opts.RootDir == "" {
		opts.RootDir = t.TempDir()
	}
	s, err := New(deps, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
