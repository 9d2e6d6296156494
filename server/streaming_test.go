package server

import (
	"bufio"
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// newStreamingBackend is a CRI streaming server stand-in: it accepts an upgrade and echoes what it reads.
func newStreamingBackend(t *testing.T) (*httptest.Server, chan *http.Request) {
	got := make(chan *http.Request, 10)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r
		if !strings.EqualFold(r.Header.Get("Upgrade"), "SPDY/3.1") {
			http.Error(w, "upgrade required", http.StatusBadRequest)
			return
		}
		conn, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer func() { _ = conn.Close() }()
		_, _ = rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n" +
			"X-Stream-Protocol-Version: v4.channel.k8s.io\r\n\r\n")
		_ = rw.Flush()
		_, _ = io.Copy(conn, rw)
	}))
	t.Cleanup(ts.Close)
	return ts, got
}

func newStreamEnv(t *testing.T) (*env, chan *http.Request) {
	e := newEnv(t)
	backend, got := newStreamingBackend(t)
	e.rt.streamURL = backend.URL
	e.addUser("proxy-token", "proxier", "create proxy", "get proxy")
	pod := testPod("web", "u1")
	e.pods.add(pod)
	e.rt.addContainer("c1", "sb1", &pod, "app", runtimeapi.ContainerState_CONTAINER_EXITED, 1, "")
	e.rt.addContainer("c2", "sb1", &pod, "app", runtimeapi.ContainerState_CONTAINER_RUNNING, 2, "")
	e.rt.sandboxes = []*runtimeapi.PodSandbox{{Id: "sb1", State: runtimeapi.PodSandboxState_SANDBOX_READY,
		Labels: map[string]string{"io.kubernetes.pod.uid": "u1"}, Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default", Uid: "u1"}}}
	return e, got
}

// upgrade sends an SPDY upgrade request over TLS and returns the response and the connection.
func (e *env) upgrade(t *testing.T, method, path string) (*http.Response, *tls.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := tls.Dial("tcp", e.ts.Listener.Addr().String(), &tls.Config{RootCAs: e.serving, ServerName: testNode, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	req, _ := http.NewRequest(method, e.ts.URL+path, nil)
	req.Header.Set("Authorization", "Bearer proxy-token")
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "SPDY/3.1")
	req.Header.Set("X-Stream-Protocol-Version", "v4.channel.k8s.io")
	if err := req.Write(conn); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		t.Fatal(err)
	}
	return resp, conn, br
}

func TestStreamsAreProxiedToTheRuntime(t *testing.T) {
	e, got := newStreamEnv(t)
	for _, tc := range []struct{ method, path, backendPath string }{
		{"POST", "/exec/default/web/app?command=sh&command=-c&command=date&input=1&output=1&tty=1&error=1", "/exec/token"},
		{"GET", "/exec/default/web/u1/app?command=ls&output=1", "/exec/token"},
		{"POST", "/attach/default/web/app?output=1&error=1", "/attach/token"},
		{"POST", "/portForward/default/web?port=8080", "/portforward/token"},
		{"POST", "/portForward/default/web/u1", "/portforward/token"},
	} {
		resp, conn, br := e.upgrade(t, tc.method, tc.path)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Upgrade") != "SPDY/3.1" {
			t.Fatalf("%s %s = %s, want 101 SPDY/3.1", tc.method, tc.path, resp.Status)
		}
		backendReq := <-got
		if backendReq.URL.Path != tc.backendPath || backendReq.Header.Get("Authorization") != "" {
			t.Errorf("backend got %s (Authorization %q), want %s without credentials", backendReq.URL.Path,
				backendReq.Header.Get("Authorization"), tc.backendPath)
		}
		if _, err := conn.Write([]byte("ping\n")); err != nil {
			t.Fatal(err)
		}
		if line, err := br.ReadString('\n'); err != nil || line != "ping\n" {
			t.Errorf("%s: echoed %q %v, want the upgraded stream", tc.path, line, err)
		}
	}
	e.rt.mu.Lock()
	defer e.rt.mu.Unlock()
	ex := e.rt.execs[0]
	if ex.ContainerId != "c2" || !slices.Equal(ex.Cmd, []string{"sh", "-c", "date"}) || !ex.Tty || !ex.Stdin || !ex.Stdout || ex.Stderr {
		t.Errorf("ExecRequest = %v, want the running container c2, the command, tty without stderr", ex)
	}
	if a := e.rt.attaches[0]; a.ContainerId != "c2" || a.Stdin || !a.Stdout || !a.Stderr {
		t.Errorf("AttachRequest = %v", a)
	}
	if pf := e.rt.forwards[0]; pf.PodSandboxId != "sb1" || !slices.Equal(pf.Port, []int32{8080}) {
		t.Errorf("PortForwardRequest = %v", pf)
	}
}

func TestStreamErrors(t *testing.T) {
	e, _ := newStreamEnv(t)
	for _, tc := range []struct {
		method, path string
		code         int
		want         string
	}{
		{"POST", "/exec/default/web/app?command=ls", 400, "at least 1 of stdin, stdout, stderr"},
		{"POST", "/exec/default/nope/app?command=ls&output=1", 404, "pod does not exist"},
		{"POST", "/exec/default/web/u9/app?command=ls&output=1", 404, "pod not found"},
		{"POST", "/exec/default/web/sidecar?command=ls&output=1", 404, `container not found ("sidecar")`},
		{"POST", "/portForward/default/web?port=http", 400, "unable to parse"},
		{"POST", "/exec/default/web/app?command=ls&output=1", 400, "Upgrade request required"},
		{"PUT", "/exec/default/web/app?command=ls&output=1", 403, "Forbidden"},
	} {
		code, body := e.do(tc.method, tc.path, "proxy-token")
		if code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("%s %s = %d %q, want %d %q", tc.method, tc.path, code, body, tc.code, tc.want)
		}
	}
}

func TestRunReturnsTheOutput(t *testing.T) {
	e, _ := newStreamEnv(t)
	e.rt.execSync = func(id string, cmd []string) *runtimeapi.ExecSyncResponse {
		if id != "c2" {
			return &runtimeapi.ExecSyncResponse{ExitCode: 127}
		}
		if cmd[0] == "false" {
			return &runtimeapi.ExecSyncResponse{Stderr: []byte("oops"), ExitCode: 1}
		}
		return &runtimeapi.ExecSyncResponse{Stdout: []byte(strings.Join(cmd, "|")), Stderr: []byte("!")}
	}
	if code, body := e.do("POST", "/run/default/web/app?cmd=echo+hello+world", "proxy-token"); code != 200 || body != "echo|hello|world!" {
		t.Errorf("/run = %d %q, want 200 with stdout then stderr", code, body)
	}
	if code, body := e.do("POST", "/run/default/web/u1/app?cmd=false", "proxy-token"); code != 500 || !strings.Contains(body, "exited with 1: oops") {
		t.Errorf("/run of a failing command = %d %q, want 500 with its exit code", code, body)
	}
}
