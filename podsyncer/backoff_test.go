package podsyncer

import (
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestBackoffDoublesToTheCapAndResetsAfterTenMinutes(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	b := newBackoff(clk, backoffInitial, backoffMax)
	const key = "pod_ns_uid_app"
	var delays []time.Duration
	for range 7 {
		exit := clk.Now()
		if w := b.InBackOffSince(key, exit); w != 0 && len(delays) == 0 {
			t.Fatalf("first failure waited %v", w)
		}
		b.Next(key, exit)
		delays = append(delays, b.Delay(key))
		if w := b.InBackOffSince(key, exit); w != b.Delay(key) {
			t.Fatalf("right after a restart the wait is %v, want %v", w, b.Delay(key))
		}
		clk.Step(b.Delay(key))
		if w := b.InBackOffSince(key, exit); w != 0 {
			t.Fatalf("after the delay the wait is %v", w)
		}
	}
	want := []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second,
		160 * time.Second, 300 * time.Second, 300 * time.Second}
	for i := range want {
		if delays[i] != want[i] {
			t.Fatalf("delays = %v, want %v", delays, want)
		}
	}
	// A container that then ran for more than 10 minutes starts over at 10 s.
	clk.Step(11 * time.Minute)
	exit := clk.Now()
	if w := b.InBackOffSince(key, exit); w != 0 {
		t.Fatalf("stale entry still backs off %v", w)
	}
	b.Next(key, exit)
	if d := b.Delay(key); d != backoffInitial {
		t.Fatalf("delay after reset = %v", d)
	}
	clk.Step(21 * time.Minute)
	b.GC()
	if d := b.Delay(key); d != 0 {
		t.Fatalf("GC kept a stale entry: %v", d)
	}
}
