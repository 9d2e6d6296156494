package controllers

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	clocktesting "k8s.io/utils/clock/testing"
)

// The node's startup is timed from boot to the first Ready status after the Node was created, in the
// kubelet's phases; a Node that existed already is not timed.
func TestNodeStartupPhases(t *testing.T) {
	boot := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(boot.Add(30 * time.Second))
	n := NewNodeStartup(clk, boot)
	clk.Step(2 * time.Second)
	n.attempt()
	clk.Step(time.Second)
	n.registered()
	clk.Step(4 * time.Second)
	n.ready()
	clk.Step(time.Minute)
	n.ready() // only the first counts
	for g, want := range map[string]float64{"pre-agent": 30, "pre-registration": 2, "registration": 1, "post-registration": 4, "total": 37} {
		got := map[string]float64{"pre-agent": testutil.ToFloat64(n.preAgent), "pre-registration": testutil.ToFloat64(n.preRegistration),
			"registration": testutil.ToFloat64(n.registration), "post-registration": testutil.ToFloat64(n.postRegistration),
			"total": testutil.ToFloat64(n.total)}[g]
		if got != want {
			t.Errorf("%s = %v s, want %v", g, got, want)
		}
	}

	restarted := NewNodeStartup(clk, boot)
	restarted.attempt()
	restarted.ready() // the Node existed: never registered by this agent
	if got := testutil.ToFloat64(restarted.total); got != 0 {
		t.Errorf("a Node that existed already was timed: %v s", got)
	}
}
