package podsyncer

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/record"
)

// An httpGet hook follows redirects only to the same host, as the kubelet's hook client and the probes do: a
// container cannot turn the node's hook request into one to another address.
func TestHTTPHookRedirects(t *testing.T) {
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { elsewhere.Add(1) }))
	defer other.Close()
	_, otherPort, _ := net.SplitHostPort(other.Listener.Addr().String())

	var agents, sameHost atomic.Value
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		switch req.URL.Path {
		case "/away":
			agents.Store(req.UserAgent())
			http.Redirect(w, req, "http://localhost:"+otherPort+"/", http.StatusFound)
		case "/here":
			http.Redirect(w, req, "/landed", http.StatusFound)
		case "/landed":
			sameHost.Store(true)
		}
	}))
	defer hook.Close()
	_, hookPort, _ := net.SplitHostPort(hook.Listener.Addr().String())
	port, _ := strconv.Atoi(hookPort)

	r := newTestSyncer(t, Deps{}, Options{})
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}
	c := &corev1.Container{Name: "c"}
	run := func(path string) error {
		return r.stop.runHTTPHook(context.Background(), pod, c, &corev1.HTTPGetAction{Host: "127.0.0.1", Port: intstr.FromInt(port), Path: path})
	}
	if err := run("/away"); err != nil {
		t.Fatalf("a redirect to another host, not followed, is the hook's answer (3xx, a success): %v", err)
	}
	if n := elsewhere.Load(); n != 0 {
		t.Errorf("the hook followed a redirect to another host (%d requests there)", n)
	}
	if got := agents.Load(); got != "kube-lifecycle/1.37" {
		t.Errorf("User-Agent = %v, want the kubelet's kube-lifecycle/1.37", got)
	}
	if err := run("/here"); err != nil {
		t.Fatal(err)
	}
	if sameHost.Load() != true {
		t.Error("a redirect to the same host was not followed")
	}
}

// An HTTPS hook answered by a plain HTTP server is tried again over HTTP, with the kubelet's
// LifecycleHTTPFallback event and counter.
func TestHTTPSHookFallsBackToHTTP(t *testing.T) {
	var hits atomic.Int32
	hook := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	defer hook.Close()
	_, hookPort, _ := net.SplitHostPort(hook.Listener.Addr().String())
	port, _ := strconv.Atoi(hookPort)
	rec := record.NewFakeRecorder(10)
	r := newTestSyncer(t, Deps{Recorder: rec}, Options{})
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}
	err := r.stop.runHTTPHook(context.Background(), pod, &corev1.Container{Name: "c"},
		&corev1.HTTPGetAction{Host: "127.0.0.1", Port: intstr.FromInt(port), Path: "/", Scheme: corev1.URISchemeHTTPS})
	if err != nil || hits.Load() != 1 {
		t.Fatalf("hook = %v after %d requests, want one plain HTTP request that succeeded", err, hits.Load())
	}
	if got := testutil.ToFloat64(r.metrics.httpFallbacks); got != 1 {
		t.Errorf("lifecycle_handler_http_fallbacks_total = %v", got)
	}
	if e := <-rec.Events; !strings.HasPrefix(e, "Warning LifecycleHTTPFallback request to HTTPS lifecycle hook 127.0.0.1:") {
		t.Errorf("event %q", e)
	}
}
