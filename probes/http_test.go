package probes

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// probeServer serves the paths HTTP probes are tested against.
func probeServer(t *testing.T, tls bool) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("fine")) })
	mux.HandleFunc("/fail", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte("secret details"))
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ok", http.StatusFound) })
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/loop", http.StatusFound) })
	mux.HandleFunc("/elsewhere", func(w http.ResponseWriter, r *http.Request) {
		_, port, _ := net.SplitHostPort(r.Host)
		http.Redirect(w, r, "http://localhost:"+port+"/ok", http.StatusFound)
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(strings.Repeat("b", 64<<10))) })
	mux.HandleFunc("/headers", func(w http.ResponseWriter, r *http.Request) {
		if r.UserAgent() != "kube-probe/1.37" || r.Header.Get("X-Probe") != "yes" || r.Host != "app.example" ||
			r.Header.Get("Accept") != "*/*" {
			w.WriteHeader(http.StatusBadRequest)
		}
	})
	mux.HandleFunc("/custom-agent", func(w http.ResponseWriter, r *http.Request) {
		if r.UserAgent() != "mine" || r.Header["Accept"] != nil {
			w.WriteHeader(http.StatusBadRequest)
		}
	})
	mux.HandleFunc("/slow", func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	var srv *httptest.Server
	if tls {
		srv = httptest.NewTLSServer(mux)
	} else {
		srv = httptest.NewServer(mux)
	}
	t.Cleanup(srv.Close)
	return srv
}

// hostPort splits a test server's URL.
func hostPort(t *testing.T, raw string) (string, int) {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	p, err := net.LookupPort("tcp", u.Port())
	if err != nil {
		t.Fatal(err)
	}
	return u.Hostname(), p
}

func TestHTTPProber(t *testing.T) {
	plain, secure := probeServer(t, false), probeServer(t, true)
	tests := []struct {
		name        string
		srv         *httptest.Server
		scheme      corev1.URIScheme
		path        string
		headers     []corev1.HTTPHeader
		timeout     time.Duration
		wantVerdict verdict
		wantOutput  string
	}{
		{name: "200", srv: plain, path: "/ok", wantVerdict: verdictSuccess, wantOutput: "fine"},
		{name: "500", srv: plain, path: "/fail", wantVerdict: verdictFailure, wantOutput: "HTTP probe failed with statuscode: 500"},
		{name: "redirect to same host", srv: plain, path: "/redirect", wantVerdict: verdictSuccess, wantOutput: "fine"},
		{name: "redirect to other host", srv: plain, path: "/elsewhere", wantVerdict: verdictWarning,
			wantOutput: "Probe terminated redirects, Response body: <a href=\"http://localhost:"},
		{name: "redirect loop", srv: plain, path: "/loop", wantVerdict: verdictFailure, wantOutput: "stopped after 10 redirects"},
		{name: "headers", srv: plain, path: "/headers", wantVerdict: verdictSuccess,
			headers: []corev1.HTTPHeader{{Name: "X-Probe", Value: "yes"}, {Name: "Host", Value: "app.example"}}},
		{name: "custom agent, no accept", srv: plain, path: "/custom-agent", wantVerdict: verdictSuccess,
			headers: []corev1.HTTPHeader{{Name: "user-agent", Value: "mine"}, {Name: "Accept", Value: ""}}},
		{name: "body capped", srv: plain, path: "/big", wantVerdict: verdictSuccess, wantOutput: strings.Repeat("b", 10<<10)},
		{name: "https without verification", srv: secure, scheme: corev1.URISchemeHTTPS, path: "/ok", wantVerdict: verdictSuccess, wantOutput: "fine"},
		{name: "timeout", srv: plain, path: "/slow", timeout: 50 * time.Millisecond, wantVerdict: verdictFailure, wantOutput: "Client.Timeout exceeded"},
	}
	p := newHTTPProber()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			host, port := hostPort(t, tt.srv.URL)
			action := &corev1.HTTPGetAction{Path: tt.path, Port: intstr.FromInt32(int32(port)), Scheme: tt.scheme, HTTPHeaders: tt.headers}
			req, err := newHTTPRequest(context.Background(), action, &corev1.Container{}, host)
			if err != nil {
				t.Fatal(err)
			}
			timeout := tt.timeout
			if timeout == 0 {
				timeout = 5 * time.Second
			}
			out := p.probe(req, timeout)
			if out.verdict != tt.wantVerdict || !strings.Contains(out.output, tt.wantOutput) {
				t.Errorf("probe = %v %q, want %v containing %q", out.verdict, out.output, tt.wantVerdict, tt.wantOutput)
			}
			if tt.wantVerdict == verdictSuccess && tt.wantOutput != "" && out.output != tt.wantOutput {
				t.Errorf("output = %d bytes, want %d", len(out.output), len(tt.wantOutput))
			}
		})
	}
}

func TestNewHTTPRequest(t *testing.T) {
	c := &corev1.Container{Ports: []corev1.ContainerPort{{Name: "web", ContainerPort: 8080}}}
	tests := []struct {
		name    string
		action  corev1.HTTPGetAction
		podIP   string
		wantURL string
		wantErr bool
	}{
		{"pod IP and named port", corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("web")}, "10.88.0.5", "http://10.88.0.5:8080/healthz", false},
		{"host and number", corev1.HTTPGetAction{Host: "1.2.3.4", Path: "/x?y=1", Port: intstr.FromInt32(81), Scheme: corev1.URISchemeHTTPS}, "10.88.0.5", "https://1.2.3.4:81/x?y=1", false},
		{"ipv6 pod", corev1.HTTPGetAction{Port: intstr.FromInt32(80)}, "fd00::5", "http://[fd00::5]:80", false},
		{"unknown port name", corev1.HTTPGetAction{Port: intstr.FromString("nope")}, "10.88.0.5", "", true},
		{"port out of range", corev1.HTTPGetAction{Port: intstr.FromInt32(70000)}, "10.88.0.5", "", true},
		{"no pod IP", corev1.HTTPGetAction{Port: intstr.FromInt32(80)}, "", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := newHTTPRequest(context.Background(), &tt.action, c, tt.podIP)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if err == nil && req.URL.String() != tt.wantURL {
				t.Errorf("URL = %s, want %s", req.URL, tt.wantURL)
			}
		})
	}
}
