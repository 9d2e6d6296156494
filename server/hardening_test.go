package server

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
)

// allowEverything lets name do every verb on every subresource the node API maps paths to.
func (e *env) allowEverything(token, name string) {
	var allowed []string
	for _, verb := range []string{"get", "create", "update", "patch", "delete"} {
		for _, sub := range []string{"proxy", "pods", "healthz", "configz", "stats", "metrics", "log", "statusz"} {
			allowed = append(allowed, verb+" "+sub)
		}
	}
	e.addUser(token, name, allowed...)
}

func TestDebuggingHandlersDisabledRefuseAsTheKubelet(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.DisableDebuggingHandlers, o.Flagz = true, flags })
	e.allowEverything("admin-token", "admin")
	pod := testPod("web", "uid-web")
	e.pods.add(pod)
	e.rt.addContainer("c1", "s1", &pod, "app", 1, 1, "")
	refused := []struct{ method, path string }{
		{"GET", "/exec/default/web/app?command=id&output=1"},
		{"POST", "/exec/default/web/app?command=id&output=1"},
		{"POST", "/exec/default/web/uid-web/app?command=id&output=1"},
		{"GET", "/attach/default/web/app?output=1"},
		{"POST", "/attach/default/web/uid-web/app?output=1"},
		{"GET", "/portForward/default/web"},
		{"POST", "/portForward/default/web/uid-web"},
		{"POST", "/run/default/web/app?cmd=id"},
		{"POST", "/run/default/web/uid-web/app?cmd=id"},
		{"GET", "/containerLogs/default/web/app"},
		{"GET", "/runningpods/"},
		{"GET", "/debug/pprof/"},
		{"GET", "/debug/pprof/profile"},
		{"GET", "/logs/"},
		{"GET", "/logs/syslog"},
		{"DELETE", "/exec/default/web/app"},
	}
	for _, r := range refused {
		t.Run(r.method+" "+r.path, func(t *testing.T) {
			code, body := e.doWith(e.client(nil), r.method, r.path, "admin-token", nil)
			if code != http.StatusMethodNotAllowed || body != "Debug endpoints are disabled.\n" {
				t.Errorf("= %d %q, want 405 %q", code, body, "Debug endpoints are disabled.\n")
			}
			if code, _ := e.do(r.method, r.path, ""); code != http.StatusUnauthorized {
				t.Errorf("without credentials = %d, want 401 (refused after authentication, as the kubelet)", code)
			}
		})
	}
	if len(e.rt.execs)+len(e.rt.attaches)+len(e.rt.forwards) != 0 {
		t.Errorf("the runtime was asked to stream: %d execs, %d attaches, %d port-forwards", len(e.rt.execs), len(e.rt.attaches), len(e.rt.forwards))
	}
	for _, p := range []string{"/configz", "/flagz", "/statusz"} {
		if code, _ := e.do("GET", p, "admin-token"); code != http.StatusNotFound {
			t.Errorf("GET %s = %d, want 404 (the kubelet installs it only with debugging handlers)", p, code)
		}
	}
	for _, p := range []string{"/healthz", "/pods", "/metrics", "/stats/summary", "/metrics/resource", "/metrics/probes"} {
		if code, body := e.do("GET", p, "admin-token"); code != http.StatusOK {
			t.Errorf("GET %s = %d %q, want 200 (not a debugging endpoint)", p, code, body)
		}
	}
}

func TestDebuggingHandlersEnabledServeConfigzProfilesAndZPages(t *testing.T) {
	logs := t.TempDir()
	writeFile(t, filepath.Join(logs, "syslog"), []byte("a line\n"))
	e := newEnv(t, func(o *Options) { o.Flagz, o.NodeLogDir = flags, logs })
	e.allowEverything("admin-token", "admin")
	for _, tt := range []struct{ path, contains string }{
		{"/configz", "kubeletconfig"},
		{"/logs/syslog", "a line"},
		{"/debug/pprof/", "Types of profiles available"},
		{"/flagz", "kubelet flagz"},
		{"/statusz", "kubelet statusz"},
	} {
		if code, body := e.do("GET", tt.path, "admin-token"); code != http.StatusOK || !strings.Contains(body, tt.contains) {
			t.Errorf("GET %s = %d %.200q, want 200 containing %q", tt.path, code, body, tt.contains)
		}
	}
}

func TestTLSBelowTheMinimumIsRefused(t *testing.T) {
	tests := []struct {
		name       string
		min        uint16
		client     uint16 // the client's only version
		handshakes bool
	}{
		{"default refuses TLS 1.1", 0, tls.VersionTLS11, false},
		{"default accepts TLS 1.2", 0, tls.VersionTLS12, true},
		{"VersionTLS13 refuses TLS 1.2", tls.VersionTLS13, tls.VersionTLS12, false},
		{"VersionTLS13 accepts TLS 1.3", tls.VersionTLS13, tls.VersionTLS13, true},
		{"VersionTLS12 accepts TLS 1.3", tls.VersionTLS12, tls.VersionTLS13, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, func(o *Options) { o.TLSMinVersion = tt.min })
			cfg := &tls.Config{RootCAs: e.serving, ServerName: testNode, MinVersion: tt.client, MaxVersion: tt.client} //nolint:gosec // the test offers old versions on purpose
			conn, err := tls.Dial("tcp", e.ts.Listener.Addr().String(), cfg)
			if err == nil {
				_ = conn.Close()
			}
			if (err == nil) != tt.handshakes {
				t.Errorf("handshake error %v, want handshake %v", err, tt.handshakes)
			}
		})
	}
}

func TestTLSCipherSuitesAreEnforced(t *testing.T) {
	suite := tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384 // the self-signed serving key is RSA
	e := newEnv(t, func(o *Options) { o.TLSCipherSuites = []uint16{suite} })
	dial := func(offer uint16) (uint16, error) {
		cfg := &tls.Config{RootCAs: e.serving, ServerName: testNode, MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{offer}}
		conn, err := tls.Dial("tcp", e.ts.Listener.Addr().String(), cfg)
		if err != nil {
			return 0, err
		}
		defer func() { _ = conn.Close() }()
		return conn.ConnectionState().CipherSuite, nil
	}
	if got, err := dial(suite); err != nil || got != suite {
		t.Errorf("offering the configured suite: %v, %s", err, tls.CipherSuiteName(got))
	}
	if _, err := dial(tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256); err == nil {
		t.Error("a suite outside tlsCipherSuites was accepted")
	}
}

// newReadOnly builds a server with a read-only port and serves its read-only handler over plain HTTP.
func newReadOnly(t *testing.T, mutate ...func(*Options)) (*env, *httptest.Server) {
	t.Helper()
	e := newEnv(t, append([]func(*Options){func(o *Options) { o.ReadOnlyPort, o.Flagz = 10255, flags }}, mutate...)...)
	ts := httptest.NewServer(e.s.readOnlyHandler)
	t.Cleanup(ts.Close)
	return e, ts
}

func get(t *testing.T, method, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestReadOnlyPortServesTheKubeletsUnauthenticatedEndpoints(t *testing.T) {
	e, ts := newReadOnly(t)
	e.pods.add(testPod("web", "uid-web"))
	reviews := e.reviews
	tests := []struct {
		method, path string
		code         int
		contains     string
	}{
		{"GET", "/healthz", http.StatusOK, "ok"},
		{"GET", "/pods", http.StatusOK, `"name":"web"`},
		{"GET", "/stats/summary", http.StatusOK, `"nodeName":"node-a"`},
		{"POST", "/stats/summary", http.StatusOK, `"nodeName":"node-a"`},
		{"GET", "/metrics", http.StatusOK, ""},
		{"GET", "/metrics/resource", http.StatusOK, ""},
		{"GET", "/metrics/probes", http.StatusOK, "process_start_time_seconds"},
		{"GET", "/configz", http.StatusNotFound, ""},
		{"GET", "/flagz", http.StatusNotFound, ""},
		{"GET", "/statusz", http.StatusNotFound, ""},
		{"GET", "/debug/pprof/", http.StatusMethodNotAllowed, "Debug endpoints are disabled."},
		{"GET", "/containerLogs/default/web/app", http.StatusMethodNotAllowed, "Debug endpoints are disabled."},
		{"POST", "/exec/default/web/app?command=id", http.StatusMethodNotAllowed, "Debug endpoints are disabled."},
		{"POST", "/run/default/web/app?cmd=id", http.StatusMethodNotAllowed, "Debug endpoints are disabled."},
		{"GET", "/portForward/default/web", http.StatusMethodNotAllowed, "Debug endpoints are disabled."},
		{"GET", "/attach/default/web/app", http.StatusMethodNotAllowed, "Debug endpoints are disabled."},
		{"GET", "/logs/", http.StatusMethodNotAllowed, "Debug endpoints are disabled."},
		{"GET", "/runningpods/", http.StatusMethodNotAllowed, "Debug endpoints are disabled."},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			code, body := get(t, tt.method, ts.URL+tt.path)
			if code != tt.code || !strings.Contains(body, tt.contains) {
				t.Errorf("= %d %q, want %d containing %q", code, body, tt.code, tt.contains)
			}
		})
	}
	if e.reviews != reviews || e.sarCount() != 0 {
		t.Error("the read-only port asked the API server to authenticate or authorize")
	}
}

func TestReadOnlyPortOffByDefault(t *testing.T) {
	e := newEnv(t)
	if e.s.readOnlyHandler != nil {
		t.Error("a read-only handler was built with readOnlyPort 0")
	}
}

// startOnLoopback starts s with every listener on a free loopback port and returns the addresses served.
func startOnLoopback(t *testing.T, s *Server) (ctx context.CancelFunc, done chan error) {
	t.Helper()
	s.listen = func(network, _ string) (net.Listener, error) { return net.Listen(network, "127.0.0.1:0") }
	c, cancel := context.WithCancel(context.Background())
	done = make(chan error, 1)
	go func() { done <- s.Start(c) }()
	return cancel, done
}

func TestStartServesTheReadOnlyPortOverPlainHTTP(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.ReadOnlyPort = 10255 })
	cancel, done := startOnLoopback(t, e.s)
	var addr net.Addr
	select {
	case addr = <-e.s.readOnlyListening:
	case err := <-done:
		t.Fatalf("Start: %v", err)
	}
	if code, body := get(t, "GET", "http://"+addr.String()+"/healthz"); code != http.StatusOK || body != "ok" {
		t.Errorf("GET /healthz on the read-only port = %d %q", code, body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Start returned %v after its context ended, want nil", err)
	}
}

func TestDisabledServerServesNoNodeAPI(t *testing.T) {
	o := validOptions(t)
	o.DisableServer = true
	o.CertDir, o.Kube = "", nil // no certificate and no API client are needed
	s, err := New(o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if s.handler != nil || s.tlsConfig != nil {
		t.Error("a node API handler was built with enableServer: false")
	}
	var listened []string
	s.listen = func(network, addr string) (net.Listener, error) {
		listened = append(listened, addr)
		return net.Listen(network, "127.0.0.1:0")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	cancel()
	if err := <-done; err != nil || len(listened) != 0 {
		t.Errorf("Start = %v, listened on %v; want nil and no listener", err, listened)
	}
}
