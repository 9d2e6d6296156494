package podlifecycle

import (
	"testing"
	"time"

	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
)

// testStart is when the fake clocks of the package's tests start.
var testStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// noRuntime is a runtime for tests that must not reach one: any call panics.
type noRuntime struct{ Runtime }

// newTestReconciler builds a reconciler through New as the package's tests need it: what they leave
// out is a runtime that must not be called, a fake recorder, a fake clock at testStart, node "node-1"
// and a temporary root directory, and it runs standalone unless given API access.
func newTestReconciler(t testing.TB, deps Deps, opts Options) *Reconciler {
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
	if opts.NodeName == "" {
		opts.NodeName = "node-1"
	}
	if opts.RootDir == "" {
		opts.RootDir = t.TempDir()
	}
	opts.Standalone = deps.Client == nil && deps.Secrets == nil && deps.Node == nil
	r, err := New(deps, opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
