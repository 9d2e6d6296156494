package server

import (
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Every request the node API gets is counted by method, path root and server type, as by the kubelet:
// unauthenticated ones too, a path outside the kubelet's routes as "other".
func TestHTTPRequestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := newEnv(t, func(o *Options) { o.Registerer = reg })
	e.addUser("reader", "reader", "get metrics")
	for _, p := range []string{"/metrics", "/metrics/probes", "/nothing-here"} {
		e.do(http.MethodGet, p, "reader")
	}
	if code, _ := e.do(http.MethodGet, "/pods", ""); code != http.StatusUnauthorized {
		t.Fatalf("anonymous /pods = %d", code)
	}
	want := `
# HELP kubelet_http_requests_total Number of the http requests received since the server started
# TYPE kubelet_http_requests_total counter
kubelet_http_requests_total{long_running="false",method="GET",path="metrics",server_type="readwrite"} 1
kubelet_http_requests_total{long_running="false",method="GET",path="metrics/probes",server_type="readwrite"} 1
kubelet_http_requests_total{long_running="false",method="GET",path="other",server_type="readwrite"} 1
kubelet_http_requests_total{long_running="false",method="GET",path="pods",server_type="readwrite"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "kubelet_http_requests_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(e.s.http.durations); n != 4 {
		t.Errorf("%d duration series, want 4", n)
	}
}

func TestMetricBucket(t *testing.T) {
	for path, want := range map[string]string{
		"/exec/ns/pod/c": "exec", "/metrics/cadvisor": "metrics/cadvisor", "/metrics": "metrics", "/metrics/other": "other",
		"/stats/summary": "stats", "/": "other", "/portForward/ns/pod": "portForward",
	} {
		if got := metricBucket(path); got != want {
			t.Errorf("metricBucket(%q) = %q, want %q", path, got, want)
		}
	}
}
