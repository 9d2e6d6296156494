package probes

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/nodelet/nodelet/podrules"
)

// maxRetries is how often a probe that errored (as opposed to failed) is tried again at once.
const maxRetries = 3

// Event reasons of the kubelet's prober.
const (
	reasonUnhealthy    = "Unhealthy"
	reasonProbeWarning = "ProbeWarning"
)

// verdict is what one run of a probe handler says.
type verdict int

const (
	verdictSuccess verdict = iota
	verdictWarning         // logically a success, with a message worth an event
	verdictFailure
	verdictUnknown // the probe could not be run: err says why
)

// outcome is one probe run: the verdict, the output shown in events, and an error for verdictUnknown.
type outcome struct {
	verdict verdict
	output  string
	err     error
}

// result maps an outcome that is not unknown to the cached result.
func (o outcome) result() result {
	if o.verdict == verdictFailure {
		return resultFailure
	}
	return resultSuccess
}

// success, warning and failure build outcomes.
func success(output string) outcome { return outcome{verdict: verdictSuccess, output: output} }
func warning(output string) outcome { return outcome{verdict: verdictWarning, output: output} }
func failure(output string) outcome { return outcome{verdict: verdictFailure, output: output} }

// unknown is an outcome for a probe that could not be run.
func unknown(err error) outcome { return outcome{verdict: verdictUnknown, err: err} }

// probeWithRetries runs the worker's probe, trying again at once while it errors.
func (m *Manager) probeWithRetries(ctx context.Context, w *worker) outcome {
	var out outcome
	for i := 0; i < maxRetries && ctx.Err() == nil; i++ {
		if out = m.runProbe(ctx, w); out.verdict != verdictUnknown {
			return out
		}
	}
	return out
}

// runProbe runs the probe's handler once.
func (m *Manager) runProbe(ctx context.Context, w *worker) outcome {
	if m.Simulate != nil {
		return m.simulated(w)
	}
	p, timeout := w.spec, seconds(w.spec.TimeoutSeconds, defaultTimeoutSeconds)
	switch {
	case p.Exec != nil:
		if m.Exec == nil {
			return unknown(errors.New("no Execer configured for exec probes"))
		}
		return execProber{exec: m.Exec}.probe(ctx, w.containerID, expandCommand(p.Exec.Command, w.container.Env), timeout)
	case p.HTTPGet != nil:
		req, err := newHTTPRequest(ctx, p.HTTPGet, w.container, m.podIP(w.podUID))
		if err != nil {
			return unknown(err)
		}
		return m.httpProber().probe(req, timeout)
	case p.TCPSocket != nil:
		return m.probeTCP(ctx, w, timeout)
	case p.GRPC != nil:
		return m.probeGRPC(ctx, w, timeout)
	}
	return unknown(fmt.Errorf("missing probe handler for container %q", w.container.Name))
}

// probeTCP resolves a tcpSocket probe's host and port and runs it.
func (m *Manager) probeTCP(ctx context.Context, w *worker, timeout time.Duration) outcome {
	a := w.spec.TCPSocket
	port, err := podrules.ResolvePort(a.Port, w.container)
	if err != nil {
		return unknown(err)
	}
	host := a.Host
	if host == "" {
		host = m.podIP(w.podUID)
	}
	if host == "" {
		return unknown(errors.New("pod has no IP"))
	}
	return tcpProber{}.probe(ctx, host, port, timeout)
}

// probeGRPC runs a grpc probe against the pod IP.
func (m *Manager) probeGRPC(ctx context.Context, w *worker, timeout time.Duration) outcome {
	a := w.spec.GRPC
	host := m.podIP(w.podUID)
	if host == "" {
		return unknown(errors.New("pod has no IP"))
	}
	service := ""
	if a.Service != nil {
		service = *a.Service
	}
	return grpcProber{}.probe(ctx, host, service, int(a.Port), timeout)
}

// httpProber returns the manager's HTTP prober, creating it once.
func (m *Manager) httpProber() *httpProber {
	m.httpOnce.Do(func() { m.http = newHTTPProber() })
	return m.http
}

// record logs the outcome and records the kubelet's event for failures, warnings and errors.
func (w *worker) record(ctx context.Context, out outcome) {
	log := logf.FromContext(ctx)
	switch out.verdict {
	case verdictSuccess:
		log.V(2).Info("Probe succeeded")
	case verdictWarning:
		log.V(1).Info("Probe succeeded with a warning", "output", out.output)
		w.event(reasonProbeWarning, w.kind.String()+" probe warning: "+out.output)
	case verdictFailure:
		log.V(1).Info("Probe failed", "output", out.output)
		w.event(reasonUnhealthy, w.kind.String()+" probe failed: "+out.output)
	case verdictUnknown:
		log.V(1).Info("Probe errored", "err", out.err)
		w.event(reasonUnhealthy, w.kind.String()+" probe errored and resulted in unknown state: "+out.err.Error())
	}
}

// event records a Warning event on the worker's container.
func (w *worker) event(reason, message string) {
	if w.m.Recorder != nil {
		w.m.Recorder.Event(w.ref, corev1.EventTypeWarning, reason, message)
	}
}

// containerRef references a container of a pod the way the kubelet does (fieldPath
// "spec.containers{name}" or "spec.initContainers{name}").
func containerRef(pod *corev1.Pod, name string) *corev1.ObjectReference {
	ref := &corev1.ObjectReference{
		Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID,
		ResourceVersion: pod.ResourceVersion, FieldPath: "spec.containers{" + name + "}",
	}
	if _, kind := podrules.FindContainer(pod, name); kind == podrules.InitContainer {
		ref.FieldPath = "spec.initContainers{" + name + "}"
	}
	return ref
}
