package server

import (
	"bytes"
	"context"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/cri-streaming/pkg/streaming"
	remotecommandserver "k8s.io/cri-streaming/pkg/streaming/remotecommand"
)

// echoRuntime is a container runtime's streaming side: exec writes its command and what it reads.
type echoRuntime struct{}

func (echoRuntime) Exec(_ context.Context, id string, cmd []string, in io.Reader, out, _ io.WriteCloser, _ bool, _ <-chan remotecommandserver.TerminalSize) error {
	_, _ = io.WriteString(out, id+" ran "+strings.Join(cmd, " ")+"\n")
	if in != nil {
		_, _ = io.Copy(out, in)
	}
	return nil
}

func (echoRuntime) Attach(context.Context, string, io.Reader, io.WriteCloser, io.WriteCloser, bool, <-chan remotecommandserver.TerminalSize) error {
	return nil
}

func (echoRuntime) PortForward(context.Context, string, int32, io.ReadWriteCloser) error { return nil }

// The node API answers a WebSocket exec (the v5 remotecommand protocol, what the API server proxies as is to a
// node that declares ExtendWebSocketsToKubelet) by translating it to the runtime's SPDY stream, as the kubelet.
func TestWebSocketExecIsTranslatedToTheRuntimesStream(t *testing.T) {
	var mu sync.Mutex
	var streamer streaming.Server
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		s := streamer
		mu.Unlock()
		s.ServeHTTP(w, r)
	}))
	defer backend.Close()
	base, _ := url.Parse(backend.URL)
	cfg := streaming.DefaultConfig
	cfg.BaseURL, cfg.StreamCreationTimeout = base, 10*time.Second
	s, err := streaming.NewServer(cfg, echoRuntime{})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	streamer = s
	mu.Unlock()

	reg := prometheus.NewRegistry()
	e, _ := newStreamEnv(t)
	e.rt.mu.Lock()
	e.rt.streamer = s
	e.rt.mu.Unlock()
	e.s.http = newHTTPMetrics(e.clock)
	if err := e.s.http.register(reg); err != nil {
		t.Fatal(err)
	}

	rc := &rest.Config{Host: e.ts.URL, BearerToken: "proxy-token",
		TLSClientConfig: rest.TLSClientConfig{ServerName: testNode, CAData: e.servingPEM(t)}}
	u, _ := url.Parse(e.ts.URL + "/exec/default/web/app?command=echo&command=hi&input=1&output=1")
	exec, err := remotecommand.NewWebSocketExecutor(rc, http.MethodGet, u.String())
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: strings.NewReader("from stdin\n"), Stdout: &out}); err != nil {
		t.Fatalf("WebSocket exec: %v", err)
	}
	if got, want := out.String(), "c2 ran echo hi\nfrom stdin\n"; got != want {
		t.Errorf("output %q, want %q", got, want)
	}
	if got := testutil.ToFloat64(e.s.http.websocket.WithLabelValues("exec")); got != 1 {
		t.Errorf("websocket_streaming_requests_total{exec} = %v", got)
	}
}

// servingPEM is the server's certificate chain as PEM, for a client's CA data.
func (e *env) servingPEM(t *testing.T) []byte {
	t.Helper()
	var out []byte
	for _, der := range e.s.tlsConfig.Certificates[0].Certificate {
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	}
	return out
}
