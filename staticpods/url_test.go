package staticpods

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

const podListJSON = `{"apiVersion":"v1","kind":"PodList","items":[
 {"metadata":{"name":"a","namespace":"kube-system"},"spec":{"containers":[{"name":"c","image":"busybox:1.36"}]}},
 {"metadata":{"name":"b","namespace":"kube-system"},"spec":{"containers":[{"name":"c","image":"busybox:1.36"}]}}]}`

// faultServer serves podListJSON, or the fault its mode names.
type faultServer struct {
	*httptest.Server
	mode    atomic.Value // string
	headers atomic.Value // http.Header of the last request
	done    chan struct{}
}

func newFaultServer(t *testing.T) *faultServer {
	s := &faultServer{done: make(chan struct{})}
	s.mode.Store("ok")
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(func() {
		close(s.done)
		s.Close()
	})
	return s
}

func (s *faultServer) serve(w http.ResponseWriter, r *http.Request) {
	s.headers.Store(r.Header.Clone())
	switch s.mode.Load().(string) {
	case "ok":
		fmt.Fprint(w, podListJSON)
	case "404":
		http.NotFound(w, r)
	case "500":
		http.Error(w, "boom", http.StatusInternalServerError)
	case "garbage":
		_, _ = w.Write(garbage())
	case "empty":
	case "timeout":
		select {
		case <-r.Context().Done():
		case <-s.done:
		}
	case "endless":
		chunk := []byte(strings.Repeat("# endless\n", 1000))
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}
}

type urlHarness struct {
	t     *testing.T
	store *Store
	rec   *recorder
	clock *clocktesting.FakeClock
	polls chan struct{}
}

func startURLSource(t *testing.T, srv *faultServer) *urlHarness {
	h := &urlHarness{t: t, rec: &recorder{}, clock: clocktesting.NewFakeClock(time.Now()), polls: make(chan struct{}, 1)}
	h.store = NewStore(testNode, h.rec.Report)
	src := &URLSource{
		URL: srv.URL + "/pods", Header: http.Header{"X-Static-Pods": []string{"token"}}, Period: testPeriod,
		Clock: h.clock, Store: h.store, Report: h.rec.Report,
		Client: &http.Client{Timeout: 200 * time.Millisecond}, MaxBytes: 64 << 10,
	}
	src.polled = func() { h.polls <- struct{}{} }
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- src.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start: %v", err)
		}
	})
	h.waitPoll()
	return h
}

func (h *urlHarness) waitPoll() {
	h.t.Helper()
	select {
	case <-h.polls:
	case <-time.After(10 * time.Second):
		h.t.Fatal("no poll")
	}
}

// poll fires one period tick and waits for the poll it starts.
func (h *urlHarness) poll() {
	h.t.Helper()
	h.clock.Step(testPeriod)
	h.waitPoll()
}

func (h *urlHarness) uids() []types.UID {
	var uids []types.UID
	for _, p := range h.store.List() {
		uids = append(uids, p.UID)
	}
	return uids
}

func TestURLSourcePodList(t *testing.T) {
	srv := newFaultServer(t)
	h := startURLSource(t, srv)
	pods := h.store.List()
	if got := podNames(pods); len(got) != 2 || got[0] != "kube-system/a-node-1" || got[1] != "kube-system/b-node-1" {
		t.Fatalf("pods = %v, want a-node-1 and b-node-1", got)
	}
	if pods[0].Annotations[AnnotationConfigSource] != SourceHTTP || !h.store.SeenSources(SourceHTTP) {
		t.Errorf("config.source = %q, seen = %v", pods[0].Annotations[AnnotationConfigSource], h.store.SeenSources(SourceHTTP))
	}
	if got := srv.headers.Load().(http.Header).Get("X-Static-Pods"); got != "token" {
		t.Errorf("header X-Static-Pods = %q, want token", got)
	}
}

// TestURLSourceFaults: each fault is reported (once while it repeats) and keeps the previous pods.
func TestURLSourceFaults(t *testing.T) {
	srv := newFaultServer(t)
	h := startURLSource(t, srv)
	want := h.uids()
	events := h.store.Subscribe(t.Context())
	next(t, events) // the initial a and b
	next(t, events)

	faults := []struct {
		mode, reason, fragment string
	}{
		{"404", ReasonUnreachable, "404 Not Found"},
		{"500", ReasonUnreachable, "500 Internal Server Error"},
		{"timeout", ReasonUnreachable, "Client.Timeout exceeded"},
		{"garbage", ReasonFailedToDecode, "malformed manifest"},
		{"endless", ReasonTooLarge, "over 65536 bytes"},
	}
	for _, f := range faults {
		srv.mode.Store(f.mode)
		h.poll()
		h.poll() // the same fault again: not reported twice
		if n := h.rec.count(f.reason, f.fragment); n != 1 {
			t.Errorf("%s: %d %s reports with %q, want 1: %v", f.mode, n, f.reason, f.fragment, h.rec.all())
		}
		if got := h.uids(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: pods %v, want the previous %v", f.mode, got, want)
		}
	}
	if got := len(h.rec.all()); got != len(faults) {
		t.Errorf("%d reports, want %d: %v", got, len(faults), h.rec.all())
	}

	// Back to the same list: nothing changes. An empty 200 then means no pods, as the kubelet.
	srv.mode.Store("ok")
	h.poll()
	h.store.Update("file:/m/z.yaml", mustDecode(t, "z", "nginx:1.27", "/m/z.yaml"))
	if got := next(t, events); got != key("z") {
		t.Fatalf("event %s, want %s: a poll returning the same list must emit nothing", got, key("z"))
	}
	h.store.Update("file:/m/z.yaml", nil)
	next(t, events)
	srv.mode.Store("empty")
	h.poll()
	if got := len(h.store.List()); got != 0 {
		t.Errorf("%d pods after an empty response, want 0", got)
	}
	if got := []types.NamespacedName{next(t, events), next(t, events)}; got[0] != key("a") || got[1] != key("b") {
		t.Errorf("events %v, want only the removal of a and b", got)
	}
}
