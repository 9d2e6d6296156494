package server

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/podconfig"
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

// kubelet_container_log_filesystem_used_bytes is what each running container's log directory holds.
func TestContainerLogMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := newEnv(t, func(o *Options) { o.Registerer = reg })
	pod := testPod("web", "u1")
	e.rt.addContainer("c1", "sb1", &pod, "app", runtimeapi.ContainerState_CONTAINER_RUNNING, 1, "")
	e.rt.addContainer("c0", "sb1", &pod, "old", runtimeapi.ContainerState_CONTAINER_EXITED, 1, "")
	dir, err := podconfig.ContainerLogDir(e.s.opts.PodLogsDir, &pod, "app")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "0.log"), []byte(strings.Repeat("x", 4096)))
	want := `
# HELP kubelet_container_log_filesystem_used_bytes Bytes used by the container's logs on the filesystem.
# TYPE kubelet_container_log_filesystem_used_bytes gauge
kubelet_container_log_filesystem_used_bytes{container="app",namespace="default",pod="web",uid="u1"} 4096
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "kubelet_container_log_filesystem_used_bytes"); err != nil {
		t.Error(err)
	}
}

// A pod's start timeline is served as JSON to a user allowed nodes/proxy, 404 for a pod the node has none of.
func TestTimelineRoute(t *testing.T) {
	e := newEnv(t, func(o *Options) {
		o.Timelines = func(ns, name string) (any, bool) {
			if ns == "default" && name == "web" {
				return map[string]string{"name": "web"}, true
			}
			return nil, false
		}
	})
	e.addUser("proxy-token", "proxier", "get proxy")
	e.addUser("stats-token", "stats", "get stats")
	if code, body := e.do(http.MethodGet, "/timeline/default/web", "proxy-token"); code != http.StatusOK || !strings.Contains(body, `"name":"web"`) {
		t.Errorf("timeline = %d %s", code, body)
	}
	if code, _ := e.do(http.MethodGet, "/timeline/default/gone", "proxy-token"); code != http.StatusNotFound {
		t.Errorf("timeline of an unknown pod = %d, want 404", code)
	}
	if code, _ := e.do(http.MethodGet, "/timeline/default/web", "stats-token"); code != http.StatusForbidden {
		t.Errorf("timeline without nodes/proxy = %d, want 403", code)
	}
}
