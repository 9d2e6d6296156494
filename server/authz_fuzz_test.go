package server

import (
	"net/http"
	"net/url"
	"path"
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// sensitivePrefixes are node API paths that need nodes/proxy: a user without it must never get a
// success from them, whatever the path's spelling.
var sensitivePrefixes = []string{"/exec", "/run", "/attach", "/portForward", "/containerLogs", "/pods", "/runningpods",
	"/configz", "/debug", "/cri"}

// FuzzNodeAPIAuthorization sends arbitrary methods and paths, as a user who may read only stats, metrics
// and logs (nodes/stats, nodes/metrics, nodes/log), through the real handler chain: no spelling of a path
// may reach the runtime's exec, attach or port-forward, or succeed on an endpoint that needs nodes/proxy.
func FuzzNodeAPIAuthorization(f *testing.F) {
	for _, seed := range []struct {
		method byte
		path   string
	}{
		{1, "/exec/default/web/app?command=ls&output=1"},
		{0, "/stats/../exec/default/web/app?command=ls&output=1"},
		{0, "/logs/../containerLogs/default/web/app"},
		{0, "/stats/%2e%2e/containerLogs/default/web/app"},
		{0, "//containerLogs/default/web/app"},
		{0, "/metrics/../pods"},
		{0, "/stats%2F..%2Fpods"},
		{1, "/logs/./../run/default/web/app?cmd=id"},
		{0, "/Stats/summary"},
		{0, "/configz/"},
	} {
		f.Add(seed.method, seed.path)
	}
	e := newEnv(f)
	e.addUser("reader-token", "reader", "get stats", "get metrics", "get log")
	pod := testPod("web", "uid-web")
	e.pods.pods = append(e.pods.pods, pod)
	e.rt.addContainer("c1", "sb1", &pod, "app", runtimeapi.ContainerState_CONTAINER_RUNNING, 1, "")
	e.rt.streamURL = "http://127.0.0.1:1/stream" // never dialled: reaching the runtime is the failure
	c := e.client(nil)
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	methods := []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodHead, http.MethodOptions}
	f.Fuzz(func(t *testing.T, m byte, p string) {
		u, err := url.Parse(e.ts.URL + "/" + strings.TrimPrefix(p, "/"))
		if err != nil {
			return
		}
		req, err := http.NewRequest(methods[int(m)%len(methods)], u.String(), nil)
		if err != nil {
			return
		}
		req.Header.Set("Authorization", "Bearer reader-token")
		resp, err := c.Do(req)
		if err != nil {
			return // a request the client refuses to send
		}
		_ = resp.Body.Close()
		e.rt.mu.Lock()
		streamed := len(e.rt.execs) + len(e.rt.attaches) + len(e.rt.forwards)
		e.rt.mu.Unlock()
		if streamed > 0 {
			t.Fatalf("%s %s reached the runtime's streaming (%d requests) without nodes/proxy", req.Method, u.RequestURI(), streamed)
		}
		if resp.StatusCode >= 200 && resp.StatusCode < 300 || resp.StatusCode == http.StatusSwitchingProtocols {
			clean := path.Clean("/" + u.Path)
			for _, prefix := range sensitivePrefixes {
				if clean == prefix || strings.HasPrefix(clean, prefix+"/") {
					t.Fatalf("%s %s (clean %s) answered %d to a user without nodes/proxy", req.Method, u.RequestURI(), clean, resp.StatusCode)
				}
			}
		}
	})
}
