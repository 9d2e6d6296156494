package podsyncer

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Back-off bounds of the kubelet: container restarts (CrashLoopBackOff) and image pulls
// (ImagePullBackOff) both wait 10 s, doubling up to 5 min. An entry left alone for twice the maximum
// (10 min) starts again from the initial delay.
const (
	backoffInitial = 10 * time.Second
	backoffMax     = 5 * time.Minute
)

// A pod whose sandbox could not be made is tried again after 1 s, doubling up to the kubelet's pod worker
// back-off after a failed sync (backOffPeriod, 10 s), and no longer: a runtime that was down for minutes gets
// every pod's sandbox retried within 10 s of its return, as the kubelet retries them.
const (
	sandboxRetryInitial = time.Second
	sandboxRetryMax     = 10 * time.Second
)

// backoff is a per-key exponential back-off on an injected clock, with the semantics of client-go's
// flowcontrol.Backoff that the kubelet uses: IsInBackOffSince(key, t) asks whether an event at t (the
// container's exit) is still within the back-off; Next(key, t) records a retry.
type backoff struct {
	clock   clock.Clock
	initial time.Duration
	max     time.Duration

	mu      sync.Mutex
	entries map[string]*backoffEntry
}

type backoffEntry struct {
	delay      time.Duration
	lastUpdate time.Time
}

func newBackoff(clk clock.Clock, initial, maxDelay time.Duration) *backoff {
	return &backoff{clock: clk, initial: initial, max: maxDelay, entries: map[string]*backoffEntry{}}
}

// expired reports whether an entry is stale: nothing happened to it for twice the maximum delay.
func (b *backoff) expired(eventTime, lastUpdate time.Time) bool {
	return eventTime.Sub(lastUpdate) > 2*b.max
}

// Next records a retry for key at eventTime: the delay doubles, or starts over if the entry is stale.
func (b *backoff) Next(key string, eventTime time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.entries[key]
	if !ok || b.expired(eventTime, e.lastUpdate) {
		e = &backoffEntry{delay: b.initial}
		b.entries[key] = e
	} else {
		e.delay = min(2*e.delay, b.max)
	}
	e.lastUpdate = b.clock.Now()
}

// InBackOffSince returns how long key must still wait after an event at eventTime; 0 means go ahead.
func (b *backoff) InBackOffSince(key string, eventTime time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.entries[key]
	if !ok || b.expired(eventTime, e.lastUpdate) {
		return 0
	}
	if wait := e.delay - b.clock.Since(eventTime); wait > 0 {
		return wait
	}
	return 0
}

// InBackOffSinceUpdate returns how long key must still wait after its last retry (Next): the kubelet's
// IsInBackOffSinceUpdate, for retries that have no event time of their own (an image pull, a sandbox); 0
// means go ahead.
func (b *backoff) InBackOffSinceUpdate(key string) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock.Now()
	e, ok := b.entries[key]
	if !ok || b.expired(now, e.lastUpdate) {
		return 0
	}
	if wait := e.delay - now.Sub(e.lastUpdate); wait > 0 {
		return wait
	}
	return 0
}

// Delay returns the current delay of key (0 if none).
func (b *backoff) Delay(key string) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e, ok := b.entries[key]; ok {
		return e.delay
	}
	return 0
}

// Reset forgets key.
func (b *backoff) Reset(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.entries, key)
}

// GC forgets entries that are stale.
func (b *backoff) GC() {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock.Now()
	for k, e := range b.entries {
		if b.expired(now, e.lastUpdate) {
			delete(b.entries, k)
		}
	}
}
