package probes

import (
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// TestReadinessHandlers runs a readiness probe of each kind through the manager against real local
// servers: the pod IP is the default host, ports may be named, and a failure is an Unhealthy event with
// the kubelet's message.
func TestReadinessHandlers(t *testing.T) {
	web := probeServer(t, false)
	_, webPort := hostPort(t, web.URL)
	tcpOpen, tcpClosed := openPort(t), closedPort(t)
	grpcPort, hs := grpcServer(t, true)
	hs.SetServingStatus("down", healthpb.HealthCheckResponse_NOT_SERVING)
	tests := []struct {
		name      string
		handler   corev1.ProbeHandler
		exit      int32
		wantReady bool
		wantEvent string
	}{
		{name: "http ok on named port", wantReady: true,
			handler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ok", Port: intstr.FromString("http")}}},
		{name: "http 500", wantEvent: "Readiness probe failed: HTTP probe failed with statuscode: 500",
			handler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/fail", Port: intstr.FromString("http")}}},
		{name: "tcp open", wantReady: true,
			handler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(int32(tcpOpen))}}},
		{name: "tcp closed", wantEvent: "Readiness probe failed: dial tcp 127.0.0.1:" + strconv.Itoa(tcpClosed) + ": connect: connection refused",
			handler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(int32(tcpClosed))}}},
		{name: "grpc serving", wantReady: true,
			handler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: int32(grpcPort)}}},
		{name: "grpc not serving", wantEvent: `Readiness probe failed: service unhealthy (responded with "NOT_SERVING")`,
			handler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: int32(grpcPort), Service: ptr.To("down")}}},
		{name: "exec exit 0", wantReady: true,
			handler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"check"}}}},
		{name: "exec exit 1", exit: 1, wantEvent: "Readiness probe failed: not ready\n",
			handler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"check"}}}},
		{name: "unknown port name", wantEvent: `Readiness probe errored and resulted in unknown state: port "nope" not found`,
			handler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("nope")}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.exec.set("check", tt.exit, "not ready\n")
			pod := newPod(nil, &corev1.Probe{ProbeHandler: tt.handler, PeriodSeconds: 10, TimeoutSeconds: 5, FailureThreshold: 1, SuccessThreshold: 1}, nil)
			pod.Spec.Containers[0].Ports[0].ContainerPort = int32(webPort)
			h.m.Sync(pod, []string{"127.0.0.1", "::1"}, []ContainerInfo{running("app", "c1")})
			if tt.wantEvent != "" {
				eventually(t, "an event", func() bool { return len(h.rec.list()) > 0 })
				if got := h.rec.list()[0]; got.message != tt.wantEvent || got.reason != "Unhealthy" {
					t.Errorf("event = %s %q, want Unhealthy %q", got.reason, got.message, tt.wantEvent)
				}
			}
			if tt.wantReady {
				eventually(t, "ready", func() bool { ready, known := h.m.Ready("c1"); return ready && known })
			} else if ready, _ := h.m.Ready("c1"); ready {
				t.Error("ready")
			}
		})
	}
}

// TestRedirectWarning: a redirect to another host is a success with a ProbeWarning event.
func TestRedirectWarning(t *testing.T) {
	web := probeServer(t, false)
	_, port := hostPort(t, web.URL)
	h := newHarness(t)
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/elsewhere", Port: intstr.FromInt32(int32(port))}}}
	h.m.Sync(newPod(nil, probe, nil), []string{"127.0.0.1"}, []ContainerInfo{running("app", "c1")})
	eventually(t, "ready", func() bool { ready, _ := h.m.Ready("c1"); return ready })
	eventually(t, "an event", func() bool { return len(h.rec.list()) == 1 })
	e := h.rec.list()[0]
	if e.reason != "ProbeWarning" || e.eventtype != corev1.EventTypeWarning || e.message[:len("Readiness probe warning: Probe terminated redirects")] != "Readiness probe warning: Probe terminated redirects" {
		t.Errorf("event = %s %s %q", e.eventtype, e.reason, e.message)
	}
}

// TestSidecarEventReference: probes of restartable init containers run, and their events name the init
// container.
func TestSidecarEventReference(t *testing.T) {
	h := newHarness(t)
	h.exec.set("side", 1, "x")
	pod := newPod(nil, nil, nil)
	pod.Spec.InitContainers = []corev1.Container{{Name: "proxy", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
		LivenessProbe: execProbe("side", 1, 1)}}
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	h.m.Sync(pod, nil, []ContainerInfo{running("proxy", "s1"), running("app", "c1")})
	eventually(t, "liveness failure", func() bool { failed, _, _ := h.m.LivenessFailed("s1"); return failed })
	if _, msg, _ := h.m.LivenessFailed("s1"); msg != "Container proxy failed liveness probe, will be restarted" {
		t.Errorf("message = %q (a sidecar restarts whatever the pod's policy)", msg)
	}
	eventually(t, "an event", func() bool { return len(h.rec.list()) == 1 })
	if got := h.rec.list()[0].ref.FieldPath; got != "spec.initContainers{proxy}" {
		t.Errorf("fieldPath = %q", got)
	}
}
