package server

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/nodelet/nodelet/probes"
)

// doHeader sends a GET with a bearer token and extra headers, returning the response's status, headers
// and body.
func (e *env) doHeader(path, token string, header map[string]string) (int, http.Header, string) {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodGet, e.ts.URL+path, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := e.client(nil).Do(req)
	if err != nil {
		e.t.Fatalf("GET %s: %v", path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func TestProfilingIsServedToProxyCallers(t *testing.T) {
	e := newEnv(t)
	e.addUser("proxy-token", "proxier", "get proxy", "create proxy")
	e.addUser("metrics-token", "scraper", "get metrics")
	tests := []struct {
		path, contentType, contains string
	}{
		{"/debug/pprof/", "text/html", "Types of profiles available"},
		{"/debug/pprof/heap?debug=1", "text/plain", "heap profile:"},
		{"/debug/pprof/goroutine?debug=1", "text/plain", "goroutine profile:"},
		{"/debug/pprof/allocs?debug=1", "text/plain", "heap profile:"},
		{"/debug/pprof/block?debug=1", "text/plain", "--- contention:"},
		{"/debug/pprof/mutex?debug=1", "text/plain", "--- mutex:"},
		{"/debug/pprof/threadcreate?debug=1", "text/plain", "threadcreate profile:"},
		{"/debug/pprof/cmdline", "text/plain", "server.test"},
		{"/debug/pprof/symbol", "text/plain", "num_symbols:"},
		{"/debug/pprof/profile?seconds=1", "application/octet-stream", ""},
		{"/debug/pprof/trace?seconds=0.05", "application/octet-stream", "go 1."},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			code, header, body := e.doHeader(tt.path, "proxy-token", nil)
			if code != http.StatusOK || !strings.HasPrefix(header.Get("Content-Type"), tt.contentType) || !strings.Contains(body, tt.contains) {
				t.Errorf("= %d %s, %.200q; want 200 %s containing %q", code, header.Get("Content-Type"), body, tt.contentType, tt.contains)
			}
			want := "Forbidden (user=scraper, verb=get, resource=nodes, subresource(s)=[proxy])\n"
			if code, body := e.do("GET", tt.path, "metrics-token"); code != http.StatusForbidden || body != want {
				t.Errorf("without nodes/proxy = %d %q, want 403 %q", code, body, want)
			}
		})
	}
	if code, body := e.do("GET", "/debug/pprof/nosuchprofile", "proxy-token"); code != http.StatusNotFound || body != "Unknown profile\n" {
		t.Errorf("GET an unknown profile = %d %q, want pprof's 404 Unknown profile", code, body)
	}
}

func TestProfilingAnswersGETOnly(t *testing.T) {
	e := newEnv(t)
	e.addUser("proxy-token", "proxier", "get proxy", "create proxy", "delete proxy")
	for _, method := range []string{"POST", "DELETE"} {
		req, err := http.NewRequest(method, e.ts.URL+"/debug/pprof/symbol", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer proxy-token")
		resp, err := e.client(nil).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed || string(b) != "Method Not Allowed" || resp.Header.Get("Allow") != "GET" {
			t.Errorf("%s /debug/pprof/symbol = %d %q Allow %q, want the kubelet's 405 Method Not Allowed, Allow: GET",
				method, resp.StatusCode, b, resp.Header.Get("Allow"))
		}
	}
}

func TestProfilingHandlerDisabledRefusesAsTheKubelet(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.DisableProfilingHandler = true })
	e.addUser("proxy-token", "proxier", "get proxy", "create proxy")
	for _, r := range []struct{ method, path string }{
		{"GET", "/debug/pprof/"}, {"GET", "/debug/pprof/heap"}, {"GET", "/debug/pprof/profile"}, {"POST", "/debug/pprof/symbol"},
	} {
		if code, body := e.do(r.method, r.path, "proxy-token"); code != http.StatusMethodNotAllowed || body != "profiling endpoint is disabled.\n" {
			t.Errorf("%s %s = %d %q, want 405 profiling endpoint is disabled.", r.method, r.path, code, body)
		}
		if code, _ := e.do(r.method, r.path, ""); code != http.StatusUnauthorized {
			t.Errorf("%s %s without credentials = %d, want 401 (refused after authentication)", r.method, r.path, code)
		}
	}
	if code, _ := e.do("GET", "/configz", "proxy-token"); code != http.StatusOK {
		t.Errorf("GET /configz = %d, want 200 (the other debugging endpoints stay)", code)
	}
}

func TestContentionProfilingSetsTheBlockProfileRate(t *testing.T) {
	for _, tt := range []struct {
		name   string
		mutate func(*Options)
		want   bool
	}{
		{"contention profiling", func(o *Options) { o.ContentionProfiling = true }, true},
		{"off (the default)", func(*Options) {}, false},
		{"profiling handler off", func(o *Options) { o.ContentionProfiling, o.DisableProfilingHandler = true, true }, false},
		{"debugging handlers off", func(o *Options) { o.ContentionProfiling, o.DisableDebuggingHandlers = true, true }, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, tt.mutate)
			var rates []int
			e.s.setBlockProfileRate = func(rate int) { rates = append(rates, rate) }
			cancel, done := startOnLoopback(t, e.s)
			select {
			case <-e.s.listening:
			case err := <-done:
				t.Fatalf("Start: %v", err)
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("Start: %v", err)
			}
			if got := len(rates) == 1 && rates[0] == 1; got != tt.want || len(rates) > 1 {
				t.Errorf("block profile rates set: %v, want rate 1 set: %v", rates, tt.want)
			}
		})
	}
	if s := (&Server{opts: Options{ContentionProfiling: true, DisableServer: true}}); s.profilesContention() {
		t.Error("contention is profiled with enableServer: false (the kubelet builds no server then)")
	}
}

func TestProbeMetricsAreServedAsTheKubelet(t *testing.T) {
	metrics := probes.NewMetrics()
	metrics.Observe(probes.ProbeLabels{Type: "Readiness", Container: "app", Pod: "web", Namespace: "default", PodUID: "uid-web"},
		probes.ResultSuccessful, 0)
	e := newEnv(t, func(o *Options) { o.ProbeMetrics = metrics })
	e.addUser("metrics-token", "scraper", "get metrics")
	e.addUser("proxy-token", "proxier", "get proxy")
	code, body := e.do("GET", "/metrics/probes", "metrics-token")
	for _, want := range []string{
		`prober_probe_total{container="app",namespace="default",pod="web",pod_uid="uid-web",probe_type="Readiness",result="successful"} 1`,
		`prober_probe_duration_seconds_count{container="app",namespace="default",pod="web",probe_type="Readiness"} 1`,
		"# HELP process_start_time_seconds [ALPHA] Start time of the process since unix epoch in seconds.",
	} {
		if code != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("GET /metrics/probes = %d, body missing %q:\n%s", code, want, body)
		}
	}
	if regexp.MustCompile(`(?m)^(controller_runtime|go_|kubelet_)`).MatchString(body) {
		t.Errorf("/metrics/probes serves more than the prober's registry:\n%s", body)
	}
	want := "Forbidden (user=proxier, verb=get, resource=nodes, subresource(s)=[metrics])\n"
	if code, body := e.do("GET", "/metrics/probes", "proxy-token"); code != http.StatusForbidden || body != want {
		t.Errorf("GET /metrics/probes without nodes/metrics = %d %q, want 403 %q", code, body, want)
	}
	if code, _ := e.do("GET", "/metrics/probes", ""); code != http.StatusUnauthorized {
		t.Errorf("GET /metrics/probes without credentials = %d, want 401", code)
	}
}

func TestProbeMetricsWithoutAProber(t *testing.T) {
	e := newEnv(t)
	e.addUser("metrics-token", "scraper", "get metrics")
	code, body := e.do("GET", "/metrics/probes", "metrics-token")
	if code != http.StatusOK || !strings.Contains(body, "process_start_time_seconds ") || strings.Contains(body, "prober_") {
		t.Errorf("GET /metrics/probes = %d %q, want the start time alone", code, body)
	}
}

// flags is a command line for /flagz.
var flags = FlagzFunc(func() map[string]string {
	return map[string]string{"node-ip": "10.0.0.7", "v": "2"}
})

// zpageLine matches a /flagz or /statusz line: name, one of the delimiters component-base picks at random,
// value.
func zpageLine(name, value string) *regexp.Regexp {
	return regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `(:|: |=| ) ?` + regexp.QuoteMeta(value) + `$`)
}

func TestFlagzIsServedAsTheKubelet(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.Flagz = flags })
	e.addUser("configz-token", "reader", "get configz")
	e.addUser("proxy-token", "proxier", "get proxy")
	code, header, body := e.doHeader("/flagz", "configz-token", nil)
	if code != http.StatusOK || header.Get("Content-Type") != "text/plain; charset=utf-8" {
		t.Fatalf("GET /flagz = %d %s %q, want 200 text/plain", code, header.Get("Content-Type"), body)
	}
	wantHeader := "\nkubelet flagz\nWarning: This endpoint is not meant to be machine parseable, has no formatting compatibility guarantees and is for debugging purposes only.\n"
	if !strings.HasPrefix(body, wantHeader) || !zpageLine("node-ip", "10.0.0.7").MatchString(body) || !zpageLine("v", "2").MatchString(body) {
		t.Errorf("GET /flagz body:\n%s\nwant component-base's header and one line per flag", body)
	}
	code, _, body = e.doHeader("/flagz", "configz-token", map[string]string{"Accept": "application/json;v=v1beta1;g=config.k8s.io;as=Flagz"})
	var structured struct {
		Kind  string            `json:"kind"`
		Flags map[string]string `json:"flags"`
	}
	if err := json.Unmarshal([]byte(body), &structured); code != http.StatusOK || err != nil || structured.Kind != "Flagz" || structured.Flags["v"] != "2" {
		t.Errorf("GET /flagz as JSON = %d %q (%v), want the Flagz kind", code, body, err)
	}
	want := "Forbidden (user=proxier, verb=get, resource=nodes, subresource(s)=[configz])\n"
	if code, body := e.do("GET", "/flagz", "proxy-token"); code != http.StatusForbidden || body != want {
		t.Errorf("GET /flagz with nodes/proxy only = %d %q, want 403 %q", code, body, want)
	}
}

func TestStatuszIsServedAsTheKubelet(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.Flagz, o.KubeletVersion = flags, "v1.37.1+nodelet" })
	e.addUser("statusz-token", "monitor", "get statusz")
	e.addUser("proxy-token", "proxier", "get proxy")
	code, header, body := e.doHeader("/statusz", "statusz-token", nil)
	if code != http.StatusOK || header.Get("Content-Type") != "text/plain; charset=utf-8" {
		t.Fatalf("GET /statusz = %d %s %q, want 200 text/plain", code, header.Get("Content-Type"), body)
	}
	if !strings.HasPrefix(body, "\nkubelet statusz\nWarning: This endpoint is not meant to be machine parseable") {
		t.Errorf("GET /statusz body:\n%s\nwant component-base's header", body)
	}
	for _, line := range [][2]string{
		{"Binary version", "1.37.1+nodelet"}, {"Emulation version", "1.37"}, {"Paths", "/configz /debug /flagz /healthz /metrics"},
	} {
		if !zpageLine(line[0], line[1]).MatchString(body) {
			t.Errorf("GET /statusz body lacks %q %q:\n%s", line[0], line[1], body)
		}
	}
	code, _, body = e.doHeader("/statusz", "statusz-token", map[string]string{"Accept": "application/json;v=v1beta1;g=config.k8s.io;as=Statusz"})
	var structured struct {
		Kind  string   `json:"kind"`
		Paths []string `json:"paths"`
	}
	if err := json.Unmarshal([]byte(body), &structured); code != http.StatusOK || err != nil || structured.Kind != "Statusz" || len(structured.Paths) != 5 {
		t.Errorf("GET /statusz as JSON = %d %q (%v), want the Statusz kind", code, body, err)
	}
	want := "Forbidden (user=proxier, verb=get, resource=nodes, subresource(s)=[statusz])\n"
	if code, body := e.do("GET", "/statusz", "proxy-token"); code != http.StatusForbidden || body != want {
		t.Errorf("GET /statusz with nodes/proxy only = %d %q, want 403 %q", code, body, want)
	}
}

func TestZPagesOffByGateOrWithoutFlags(t *testing.T) {
	e := newEnv(t) // no flag set
	e.addUser("admin-token", "admin", "get configz", "get statusz")
	if code, _ := e.do("GET", "/flagz", "admin-token"); code != http.StatusNotFound {
		t.Errorf("GET /flagz without a flag set = %d, want 404", code)
	}
	if _, _, body := e.doHeader("/statusz", "admin-token", nil); !zpageLine("Paths", "/configz /debug /healthz /metrics").MatchString(body) {
		t.Errorf("GET /statusz without /flagz lists:\n%s", body)
	}
	e = newEnv(t, func(o *Options) { o.Flagz, o.DisableStatusz = flags, true })
	e.addUser("admin-token", "admin", "get configz", "get statusz")
	if code, _ := e.do("GET", "/statusz", "admin-token"); code != http.StatusNotFound {
		t.Errorf("GET /statusz with ComponentStatusz off = %d, want 404", code)
	}
	if code, _ := e.do("GET", "/flagz", "admin-token"); code != http.StatusOK {
		t.Errorf("GET /flagz = %d, want 200", code)
	}
}
