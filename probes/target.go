package probes

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/podrules"
)

// probeType is liveness, readiness or startup.
type probeType int

const (
	liveness probeType = iota
	readiness
	startup
	numProbeTypes
)

// probeTypes lists the probe types in the order workers are started.
var probeTypes = []probeType{startup, readiness, liveness}

// String is the name the kubelet uses in events ("Liveness probe failed: ...").
func (t probeType) String() string {
	switch t {
	case liveness:
		return "Liveness"
	case readiness:
		return "Readiness"
	case startup:
		return "Startup"
	}
	return "Unknown"
}

// of returns the container's probe of this type, or nil.
func (t probeType) of(c *corev1.Container) *corev1.Probe {
	switch t {
	case liveness:
		return c.LivenessProbe
	case readiness:
		return c.ReadinessProbe
	case startup:
		return c.StartupProbe
	}
	return nil
}

// result is a cached probe result; resultNone means the probe has not produced one yet.
type result int8

const (
	resultNone result = iota
	resultSuccess
	resultFailure
)

// target is one running container attempt (one container ID) and its probe results.
type target struct {
	name     string
	pod      types.NamespacedName
	restart  bool // a killed container is started again under the restart policy
	deleting bool // the pod is being deleted: liveness and startup no longer count
	probes   [numProbeTypes]*corev1.Probe
	results  [numProbeTypes]result
	// simulated are the simulation's answers (Manager.Simulate), refreshed on every sync.
	simulated [numProbeTypes]bool
}

// newTarget records the probes of a container attempt.
func newTarget(pod *corev1.Pod, c *corev1.Container) *target {
	t := &target{
		name:    c.Name,
		pod:     types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name},
		restart: podrules.RestartsAfterKill(c, &pod.Spec),
	}
	for _, kind := range probeTypes {
		if p := kind.of(c); p != nil {
			t.probes[kind] = p.DeepCopy()
		}
	}
	return t
}

// outcome reports a probe's result as (success, known); without a probe it is (true, true).
func (t *target) outcome(kind probeType) (ok, known bool) {
	if t.probes[kind] == nil {
		return true, true
	}
	return t.results[kind] == resultSuccess, t.results[kind] != resultNone
}

// started reports whether the container has started by its startup probe.
func (t *target) started() (started, known bool) {
	return t.outcome(startup)
}

// effective is the result callers see: readiness starts as Failure, liveness as Success, startup unknown.
func (t *target) effective(kind probeType) result {
	r := t.results[kind]
	if r != resultNone {
		return r
	}
	switch kind {
	case readiness:
		return resultFailure
	case liveness:
		return resultSuccess
	}
	return resultNone
}

// killMessage is the kubelet's message for killing a container whose liveness or startup probe failed.
func (t *target) killMessage(kind probeType) string {
	msg := "Container " + t.name + " failed liveness probe"
	if kind == startup {
		msg = "Container " + t.name + " failed startup probe"
	}
	if t.restart {
		msg += ", will be restarted"
	}
	return msg
}
