// Package probes runs the startup, liveness and readiness probes of running containers, the kubelet's
// prober model: one worker goroutine per container and probe, one single-method prober per protocol
// (exec through the CRI's ExecSync, httpGet, tcpSocket, grpc health), thresholds applied by the worker,
// and a result cache keyed by container ID.
//
// The Pod reconciler calls Manager.Sync on every sync of a running pod and RemovePod when the pod is gone;
// it reads Ready, Started and LivenessFailed when it computes actions and status, and receives result
// changes through Manager.OnChange, which it turns into reconcile requests. A probe failure is a result
// (and an Unhealthy event), never an error. Each probe run that gives a result is recorded in the kubelet's
// prober metrics (prober_probe_total, prober_probe_duration_seconds: Metrics, through the Manager's
// MetricsRecorder), which the node API serves at /metrics/probes.
//
// The package reports; it must not restart or kill containers itself, and it must not write pod status.
// All waiting is on the injected clock, so tests drive time with a fake clock.
package probes
