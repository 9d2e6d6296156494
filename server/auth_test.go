package server

import (
	"bytes"
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"k8s.io/apiserver/pkg/authentication/user"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
)

// endpoints are every route (and an unserved path, /logs/), with the subresources the kubelet authorizes them as.
var endpoints = []struct {
	method, path, verb, subresources string
}{
	{"GET", "/healthz", "get", "[healthz proxy]"},
	{"GET", "/pods", "get", "[pods proxy]"},
	{"GET", "/configz", "get", "[configz proxy]"},
	{"GET", "/metrics", "get", "[metrics]"},
	{"GET", "/metrics/resource", "get", "[metrics]"},
	{"GET", "/metrics/probes", "get", "[metrics]"},
	{"GET", "/stats/summary", "get", "[stats]"},
	{"GET", "/containerLogs/default/web/app", "get", "[proxy]"},
	{"GET", "/exec/default/web/app?command=ls&output=1", "get", "[proxy]"},
	{"POST", "/exec/default/web/uid-1/app?command=ls&output=1", "create", "[proxy]"},
	{"POST", "/attach/default/web/app?output=1", "create", "[proxy]"},
	{"POST", "/portForward/default/web", "create", "[proxy]"},
	{"POST", "/run/default/web/app?cmd=ls", "create", "[proxy]"},
	{"GET", "/debug/pprof/", "get", "[proxy]"},
	{"GET", "/debug/pprof/heap", "get", "[proxy]"},
	{"GET", "/flagz", "get", "[configz]"},
	{"GET", "/statusz", "get", "[statusz]"},
	{"GET", "/logs/", "get", "[log]"},
}

func TestNoOrBadCredentialsAreUnauthorized(t *testing.T) {
	e := newEnv(t)
	for _, ep := range endpoints {
		for _, token := range []string{"", "not-a-token"} {
			code, body := e.do(ep.method, ep.path, token)
			if code != http.StatusUnauthorized || body != "Unauthorized\n" {
				t.Errorf("%s %s (token %q) = %d %q, want 401 Unauthorized", ep.method, ep.path, token, code, body)
			}
		}
	}
}

func TestValidTokenWithoutPermissionIsForbiddenEverywhere(t *testing.T) {
	e := newEnv(t)
	e.addUser("alice-token", "alice")
	for _, ep := range endpoints {
		code, body := e.do(ep.method, ep.path, "alice-token")
		want := "Forbidden (user=alice, verb=" + ep.verb + ", resource=nodes, subresource(s)=" + ep.subresources + ")\n"
		if code != http.StatusForbidden || body != want {
			t.Errorf("%s %s = %d %q, want 403 %q", ep.method, ep.path, code, body, want)
		}
	}
}

func TestClientCertificateAuthenticatesAsCommonNameAndOrganizations(t *testing.T) {
	e := newEnv(t)
	e.mu.Lock()
	e.allow("bob", "get healthz")
	e.mu.Unlock()
	cert := e.ca.clientCert(t, "bob", []string{"ops", "dev"}, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	code, body := e.doWith(e.client(cert), "GET", "/healthz", "", nil)
	if code != http.StatusOK || body != "ok" {
		t.Fatalf("GET /healthz with a client certificate = %d %q, want 200 ok", code, body)
	}
	spec := e.sars[0]
	groups := slices.Sorted(slices.Values(spec.Groups))
	if spec.User != "bob" || !slices.Equal(groups, []string{"dev", "ops", user.AllAuthenticated}) {
		t.Errorf("reviewed user %q groups %v, want bob [ops dev system:authenticated]", spec.User, spec.Groups)
	}
}

func TestForeignOrExpiredClientCertificateIsUnauthorized(t *testing.T) {
	e := newEnv(t)
	e.mu.Lock()
	e.allow("bob", "get healthz", "get proxy")
	e.mu.Unlock()
	now := time.Now()
	foreign := newTestCA(t, "other-ca")
	for name, cert := range map[string]*tls.Certificate{
		"another CA":    foreign.clientCert(t, "bob", nil, now.Add(-time.Hour), now.Add(time.Hour)),
		"expired":       e.ca.clientCert(t, "bob", nil, now.Add(-2*time.Hour), now.Add(-time.Hour)),
		"not yet valid": e.ca.clientCert(t, "bob", nil, now.Add(time.Hour), now.Add(2*time.Hour)),
	} {
		if code, body := e.doWith(e.client(cert), "GET", "/healthz", "", nil); code != http.StatusUnauthorized {
			t.Errorf("client certificate from %s: %d %q, want 401", name, code, body)
		}
	}
}

func TestSubresourceMapping(t *testing.T) {
	e := newEnv(t)
	e.addUser("log-token", "logreader", "get log")
	e.addUser("proxy-token", "proxier", "get proxy", "create proxy")
	e.addUser("stats-token", "statsreader", "get stats", "get metrics")
	for _, tc := range []struct {
		token, method, path string
		allowed             bool
	}{
		{"log-token", "GET", "/logs/", true},
		{"log-token", "GET", "/containerLogs/default/web/app", false},
		{"log-token", "POST", "/exec/default/web/app?command=ls&output=1", false},
		{"proxy-token", "POST", "/exec/default/web/app?command=ls&output=1", true},
		{"proxy-token", "POST", "/attach/default/web/app?output=1", true},
		{"proxy-token", "GET", "/containerLogs/default/web/app", true},
		{"proxy-token", "GET", "/healthz", true},
		{"proxy-token", "GET", "/pods", true},
		{"proxy-token", "GET", "/stats/summary", false},
		{"stats-token", "GET", "/stats/summary", true},
		{"stats-token", "GET", "/metrics/resource", true},
		{"stats-token", "GET", "/metrics/probes", true},
		{"stats-token", "GET", "/debug/pprof/", false},
		{"proxy-token", "GET", "/debug/pprof/", true},
		{"proxy-token", "GET", "/metrics/probes", false},
		{"stats-token", "GET", "/pods", false},
		{"stats-token", "POST", "/exec/default/web/app?command=ls&output=1", false},
	} {
		code, body := e.do(tc.method, tc.path, tc.token)
		if got := code != http.StatusForbidden && code != http.StatusUnauthorized; got != tc.allowed {
			t.Errorf("%s %s %s = %d %q, want allowed=%v", tc.token, tc.method, tc.path, code, body, tc.allowed)
		}
	}
}

func TestRequestAttributes(t *testing.T) {
	for _, tc := range []struct {
		method, path, verb string
		subs               []string
	}{
		{"GET", "/stats/summary", "get", []string{"stats"}},
		{"GET", "/stats", "get", []string{"stats"}},
		{"HEAD", "/metrics/resource", "get", []string{"metrics"}},
		{"GET", "/logs/syslog", "get", []string{"log"}},
		{"POST", "/checkpoint/ns/pod/c", "create", []string{"checkpoint"}},
		{"GET", "/pods", "get", []string{"pods", "proxy"}},
		{"GET", "/podsX", "get", []string{"proxy"}},
		{"GET", "/healthz/ping", "get", []string{"healthz", "proxy"}},
		{"GET", "/configz", "get", []string{"configz", "proxy"}},
		{"GET", "/flagz", "get", []string{"configz"}},
		{"GET", "/statusz", "get", []string{"statusz"}},
		{"GET", "/metrics/probes", "get", []string{"metrics"}},
		{"GET", "/debug/pprof/profile", "get", []string{"proxy"}},
		{"PUT", "/exec/a/b/c", "update", []string{"proxy"}},
		{"PATCH", "/spec/", "patch", []string{"proxy"}},
		{"DELETE", "/containerLogs/a/b/c", "delete", []string{"proxy"}},
		{"OPTIONS", "/run/a/b/c", "", []string{"proxy"}},
	} {
		r := httptest.NewRequest(tc.method, tc.path, nil)
		attrs := requestAttributes(&user.DefaultInfo{Name: "u"}, r, testNode)
		var subs []string
		for _, a := range attrs {
			subs = append(subs, a.Subresource)
			if a.Verb != tc.verb || a.Node != testNode {
				t.Errorf("%s %s: verb %q node %q, want %q %q", tc.method, tc.path, a.Verb, a.Node, tc.verb, testNode)
			}
		}
		if !slices.Equal(subs, tc.subs) {
			t.Errorf("%s %s: subresources %v, want %v", tc.method, tc.path, subs, tc.subs)
		}
	}
}

func TestAuthorizationDecisionsAreCachedForTheirTTL(t *testing.T) {
	e := newEnv(t)
	e.addUser("erin-token", "erin", "get healthz")
	e.addUser("frank-token", "frank")
	get := func(token string, want int) {
		t.Helper()
		if code, body := e.do("GET", "/healthz", token); code != want {
			t.Fatalf("GET /healthz as %s = %d %q, want %d", token, code, body, want)
		}
	}
	get("erin-token", 200)
	get("erin-token", 200)
	e.clock.Step(4 * time.Minute)
	get("erin-token", 200)
	if n := e.sarCount(); n != 1 {
		t.Fatalf("allowed decision within cacheAuthorizedTTL: %d reviews, want 1", n)
	}
	e.clock.Step(2 * time.Minute)
	get("erin-token", 200)
	if n := e.sarCount(); n != 2 {
		t.Fatalf("allowed decision after cacheAuthorizedTTL: %d reviews, want 2", n)
	}
	get("frank-token", 403) // healthz, then proxy
	get("frank-token", 403)
	if n := e.sarCount(); n != 4 {
		t.Fatalf("denied decisions within cacheUnauthorizedTTL: %d reviews, want 4", n)
	}
	e.clock.Step(31 * time.Second)
	get("frank-token", 403)
	if n := e.sarCount(); n != 6 {
		t.Fatalf("denied decisions after cacheUnauthorizedTTL: %d reviews, want 6", n)
	}
}

func TestTokenReviewsAreCachedForCacheTTL(t *testing.T) {
	e := newEnv(t)
	e.addUser("erin-token", "erin", "get healthz")
	reviews := func() int { e.mu.Lock(); defer e.mu.Unlock(); return e.reviews }
	for range 3 {
		e.do("GET", "/healthz", "erin-token")
		e.do("GET", "/healthz", "unknown-token")
	}
	if n := reviews(); n != 2 {
		t.Fatalf("within cacheTTL: %d token reviews, want 2 (one per token, negative ones cached too)", n)
	}
	e.clock.Step(2*time.Minute + time.Second)
	e.do("GET", "/healthz", "erin-token")
	if n := reviews(); n != 3 {
		t.Fatalf("after cacheTTL: %d token reviews, want 3", n)
	}
}

func TestAnonymousOnlyWhenEnabled(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.Auth.Anonymous.Enabled = ptr.To(true) })
	e.mu.Lock()
	e.allow(user.Anonymous, "get healthz")
	e.mu.Unlock()
	if code, _ := e.do("GET", "/healthz", ""); code != http.StatusOK {
		t.Fatalf("anonymous GET /healthz = %d, want 200", code)
	}
	if spec := e.sars[0]; spec.User != user.Anonymous || !slices.Equal(spec.Groups, []string{user.AllUnauthenticated}) {
		t.Errorf("reviewed %q %v, want system:anonymous [system:unauthenticated]", spec.User, spec.Groups)
	}
	if code, _ := e.do("GET", "/healthz", "bad-token"); code != http.StatusUnauthorized {
		t.Errorf("a bad token must not fall back to anonymous: %d, want 401", code)
	}
	if code, _ := e.do("GET", "/pods", ""); code != http.StatusForbidden {
		t.Errorf("anonymous GET /pods = %d, want 403", code)
	}
}

func TestAlwaysAllow(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.Authz.Mode = kubeletconfigv1beta1.KubeletAuthorizationModeAlwaysAllow })
	e.addUser("alice-token", "alice")
	if code, _ := e.do("GET", "/pods", "alice-token"); code != http.StatusOK {
		t.Errorf("AlwaysAllow GET /pods = %d, want 200", code)
	}
	if code, _ := e.do("GET", "/pods", ""); code != http.StatusUnauthorized {
		t.Errorf("AlwaysAllow still authenticates: %d, want 401", code)
	}
	if n := e.sarCount(); n != 0 {
		t.Errorf("AlwaysAllow made %d subject access reviews", n)
	}
}

func TestOversizedBodyIsRefused(t *testing.T) {
	e := newEnv(t)
	e.addUser("proxy-token", "proxier", "create proxy")
	big := bytes.Repeat([]byte("x"), maxBodyBytes+1)
	for _, token := range []string{"", "proxy-token"} {
		code, _ := e.doWith(e.client(nil), "POST", "/run/default/web/app?cmd=ls", token, bytes.NewReader(big))
		if code != http.StatusRequestEntityTooLarge {
			t.Errorf("POST with a %d-byte body (token %q) = %d, want 413", len(big), token, code)
		}
	}
}

func TestNewRejectsInvalidOptions(t *testing.T) {
	for name, mutate := range map[string]func(*Options){
		"no authentication":  func(o *Options) { o.Auth.X509.ClientCAFile = ""; o.Auth.Webhook.Enabled = ptr.To(false) },
		"webhook, no client": func(o *Options) { o.Kube = nil },
		"unknown mode":       func(o *Options) { o.Authz.Mode = "RBAC" },
		"no mode":            func(o *Options) { o.Authz.Mode = "" },
		"one log file":       func(o *Options) { o.ContainerLogMaxSize = "10Mi"; o.ContainerLogMaxFiles = 1 },
		"bad log size":       func(o *Options) { o.ContainerLogMaxSize = "ten" },
		"missing CA file":    func(o *Options) { o.Auth.X509.ClientCAFile = "/nonexistent/ca.crt" },
		"cert without key":   func(o *Options) { o.TLSCertFile = "/x.crt" },
	} {
		t.Run(name, func(t *testing.T) {
			o := validOptions(t)
			mutate(&o)
			if _, err := New(o); err == nil {
				t.Errorf("New accepted %s", name)
			}
		})
	}
}
