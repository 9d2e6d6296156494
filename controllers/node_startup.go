package controllers

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"
)

// NodeStartup is the kubelet's node startup latency tracker: the machine's boot, the agent's start, its
// first registration attempt, the Node's creation and its first Ready status, reported as the kubelet's
// kubelet_node_startup_* gauges. A Node that existed already (a restart) is not timed.
type NodeStartup struct {
	clock clock.PassiveClock

	mu                                      sync.Mutex
	bootTime, startTime                     time.Time
	attemptTime, registeredTime, readyTime  time.Time
	preAgent, preRegistration, registration prometheus.Gauge
	postRegistration, total                 prometheus.Gauge
}

// NewNodeStartup starts timing at the agent's start (now); bootTime is the machine's boot (zero: unknown,
// the gauges that need it stay 0).
func NewNodeStartup(clk clock.PassiveClock, bootTime time.Time) *NodeStartup {
	gauge := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Subsystem: "kubelet", Name: name, Help: help})
	}
	return &NodeStartup{clock: clk, bootTime: bootTime, startTime: clk.Now(),
		preAgent:         gauge("node_startup_pre_kubelet_duration_seconds", "Duration in seconds of node startup before kubelet starts."),
		preRegistration:  gauge("node_startup_pre_registration_duration_seconds", "Duration in seconds of node startup before registration."),
		registration:     gauge("node_startup_registration_duration_seconds", "Duration in seconds of node startup during registration."),
		postRegistration: gauge("node_startup_post_registration_duration_seconds", "Duration in seconds of node startup after registration."),
		total:            gauge("node_startup_duration_seconds", "Duration in seconds of node startup in total."),
	}
}

// Register registers the gauges.
func (n *NodeStartup) Register(reg prometheus.Registerer) error {
	for _, g := range []prometheus.Collector{n.preAgent, n.preRegistration, n.registration, n.postRegistration, n.total} {
		if err := reg.Register(g); err != nil {
			return err
		}
	}
	return nil
}

// attempt notes the first registration attempt.
func (n *NodeStartup) attempt() {
	if n == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.attemptTime.IsZero() {
		n.attemptTime = n.clock.Now()
	}
}

// registered notes that the Node was created (not found existing).
func (n *NodeStartup) registered() {
	if n == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.attemptTime.IsZero() || !n.registeredTime.IsZero() {
		return
	}
	n.registeredTime = n.clock.Now()
	if !n.bootTime.IsZero() {
		n.preAgent.Set(n.startTime.Sub(n.bootTime).Seconds())
	}
	n.preRegistration.Set(n.attemptTime.Sub(n.startTime).Seconds())
	n.registration.Set(n.registeredTime.Sub(n.attemptTime).Seconds())
}

// ready notes a status written with Ready true, after a registration that created the Node.
func (n *NodeStartup) ready() {
	if n == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.registeredTime.IsZero() || !n.readyTime.IsZero() {
		return
	}
	n.readyTime = n.clock.Now()
	n.postRegistration.Set(n.readyTime.Sub(n.registeredTime).Seconds())
	if !n.bootTime.IsZero() {
		n.total.Set(n.readyTime.Sub(n.bootTime).Seconds())
	}
}
