package server

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// criLine is one record of a CRI log file.
func criLine(t time.Time, stream, tag, content string) string {
	return t.Format(time.RFC3339Nano) + " " + stream + " " + tag + " " + content + "\n"
}

// logEnv has pod default/web (uid u1) whose container app runs its second attempt (c2, 1.log) after a
// first one (c1, 0.log), and a user allowed nodes/proxy.
type logEnv struct {
	*env
	t0         time.Time
	current    string // c2's log file
	previous   string // c1's log file
	currentLog string
}

func newLogEnv(t *testing.T) *logEnv {
	e := newEnv(t)
	e.addUser("proxy-token", "proxier", "get proxy")
	le := &logEnv{env: e, t0: e.clock.Now().Add(-10 * time.Second)}
	pod := testPod("web", "u1")
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{
		Name: "app", ContainerID: "containerd://c2",
		State:                corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ContainerID: "containerd://c1"}},
	}}
	e.pods.add(pod)
	dir := filepath.Join(e.s.opts.PodLogsDir, "default_web_u1", "app")
	le.previous, le.current = filepath.Join(dir, "0.log"), filepath.Join(dir, "1.log")
	e.rt.addContainer("c1", "sb1", &pod, "app", runtimeapi.ContainerState_CONTAINER_EXITED, 1, le.previous)
	e.rt.addContainer("c2", "sb1", &pod, "app", runtimeapi.ContainerState_CONTAINER_RUNNING, 2, le.current)
	writeFile(t, le.previous, []byte(criLine(le.t0.Add(-time.Minute), "stdout", "F", "old attempt")))
	le.currentLog = criLine(le.t0, "stdout", "F", "line one") +
		criLine(le.t0.Add(time.Second), "stderr", "F", "line two") +
		criLine(le.t0.Add(2*time.Second), "stdout", "P", "part-") +
		criLine(le.t0.Add(2*time.Second), "stdout", "F", "ial") +
		criLine(le.t0.Add(3*time.Second), "stdout", "F", "line four")
	writeFile(t, le.current, []byte(le.currentLog))
	return le
}

func TestContainerLogsOptions(t *testing.T) {
	le := newLogEnv(t)
	ts := func(d time.Duration) string { return le.t0.Add(d).Format(timestampFormat) }
	since := le.t0.Add(time.Second).Format(time.RFC3339)
	for _, tc := range []struct {
		query string
		code  int
		want  string
	}{
		{"", 200, "line one\nline two\npart-ial\nline four\n"},
		{"tailLines=1", 200, "line four\n"},
		{"tailLines=3", 200, "part-ial\nline four\n"},
		{"tailLines=0", 200, ""},
		{"tail=all", 200, "line one\nline two\npart-ial\nline four\n"},
		{"tail=2", 200, "ial\nline four\n"},
		{"timestamps=true", 200, ts(0) + " line one\n" + ts(time.Second) + " line two\n" + ts(2*time.Second) + " part-ial\n" + ts(3*time.Second) + " line four\n"},
		{"sinceTime=" + since, 200, "line two\npart-ial\nline four\n"},
		{"sinceSeconds=8", 200, "part-ial\nline four\n"},
		{"limitBytes=12", 200, "line one\nlin"},
		{"previous=true", 200, "old attempt\n"},
		{"stream=Stderr", 200, "line two\n"},
		{"stream=Stdout&limitBytes=9", 200, "line one\n"},
		{"tailLines=-1", 422, "Invalid request"},
		{"limitBytes=0", 422, "Invalid request"},
		{"sinceSeconds=0", 422, "Invalid request"},
		{"sinceSeconds=5&sinceTime=" + since, 422, "Invalid request"},
		{"stream=Stdout&tailLines=1", 422, "Invalid request"},
		{"stream=Both", 422, "Invalid request"},
		{"tailLines=x", 400, "Unable to decode query"},
		{"follow=maybe", 400, "Unable to decode query"},
	} {
		code, body := le.do("GET", "/containerLogs/default/web/app?"+tc.query, "proxy-token")
		if code != tc.code || (code == 200 && body != tc.want) || (code != 200 && !strings.Contains(body, tc.want)) {
			t.Errorf("?%s = %d %q, want %d %q", tc.query, code, body, tc.code, tc.want)
		}
	}
}

func TestContainerLogsErrors(t *testing.T) {
	le := newLogEnv(t)
	other := testPod("fresh", "u2")
	other.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}}}
	le.pods.add(other)
	for _, tc := range []struct {
		path string
		code int
		want string
	}{
		{"/containerLogs/default/nope/app", 404, "pod does not exist"},
		{"/containerLogs/default/web/nope", 404, `container "nope" not found in pod "web"`},
		{"/containerLogs/default/fresh/app", 400, `container "app" in pod "fresh" is waiting to start: ImagePullBackOff`},
		{"/containerLogs/default/fresh/app?previous=true", 400, `previous terminated container "app" in pod "fresh" not found`},
	} {
		code, body := le.do("GET", tc.path, "proxy-token")
		if code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("GET %s = %d %q, want %d %q", tc.path, code, body, tc.code, tc.want)
		}
	}
}

func TestContainerLogsWithoutStatusUseTheNewestAttempt(t *testing.T) {
	le := newLogEnv(t)
	le.pods.mu.Lock()
	le.pods.pods[0].Status = corev1.PodStatus{}
	le.pods.mu.Unlock()
	code, body := le.do("GET", "/containerLogs/default/web/app?tailLines=1", "proxy-token")
	if code != 200 || body != "line four\n" {
		t.Errorf("GET = %d %q, want the running attempt's last line", code, body)
	}
}

func TestContainerLogsUnterminatedLastRecord(t *testing.T) {
	le := newLogEnv(t)
	appendFile(t, le.current, strings.TrimSuffix(criLine(le.t0.Add(4*time.Second), "stdout", "F", "cut"), "\n"))
	if code, body := le.do("GET", "/containerLogs/default/web/app?tailLines=1", "proxy-token"); code != 200 || body != "line four\n" {
		t.Errorf("tailLines=1 = %d %q: an unterminated record is not a line", code, body)
	}
	if _, body := le.do("GET", "/containerLogs/default/web/app", "proxy-token"); !strings.HasSuffix(body, "line four\ncut") {
		t.Errorf("a full read = %q, want the unterminated record at its end", body)
	}
}

// TestFollowAcrossRotation follows the log while it is rotated (a record written to the old file while the
// runtime reopens its log is not lost), then ends when the container exits.
func TestFollowAcrossRotation(t *testing.T) {
	le := newLogEnv(t)
	le.s.rotation = rotationPolicy{maxSize: 1, maxFiles: 5}
	le.rt.reopen = func(string) error {
		// The container writes one more record to the renamed file before the runtime switches files.
		appendFile(t, le.current+"."+le.clock.Now().Format(rotatedTimeFormat), criLine(le.t0.Add(4*time.Second), "stdout", "F", "in flight"))
		writeFile(t, le.current, nil)
		return nil
	}
	resp, lines := le.follow(t, "/containerLogs/default/web/app?follow=true&tailLines=1")
	defer func() { _ = resp.Body.Close() }()
	lines.expect(t, "line four")
	le.s.rot().rotateOnce(context.Background())
	if got := le.rt.reopenedIDs(); len(got) != 1 || got[0] != "c2" {
		t.Fatalf("ReopenContainerLog calls: %v, want [c2]", got)
	}
	appendFile(t, le.current, criLine(le.t0.Add(5*time.Second), "stdout", "F", "after rotation"))
	lines.expect(t, "in flight")
	lines.expect(t, "after rotation")
	appendFile(t, le.current, criLine(le.t0.Add(6*time.Second), "stdout", "F", "last words"))
	lines.expect(t, "last words")
	le.rt.setState("c2", runtimeapi.ContainerState_CONTAINER_EXITED)
	lines.expectEOF(t, le.clock)
}

// lineReader reads a streamed response line by line, in the background.
type lineReader struct {
	lines chan string
}

func (le *logEnv) follow(t *testing.T, path string) (*http.Response, *lineReader) {
	t.Helper()
	req, _ := http.NewRequest("GET", le.ts.URL+path, nil)
	req.Header.Set("Authorization", "Bearer proxy-token")
	resp, err := le.client(nil).Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET %s: %v %v", path, err, resp)
	}
	lr := &lineReader{lines: make(chan string, 100)}
	go func() {
		defer close(lr.lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lr.lines <- sc.Text()
		}
	}()
	return resp, lr
}

func (lr *lineReader) expect(t *testing.T, want string) {
	t.Helper()
	select {
	case got, ok := <-lr.lines:
		if !ok || got != want {
			t.Fatalf("followed line %q (open %v), want %q", got, ok, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no followed line within 10s, want %q", want)
	}
}

// expectEOF ticks the follower's poll once (the container exited without writing, so only the poll wakes
// it) and waits for the stream to end.
func (lr *lineReader) expectEOF(t *testing.T, clk interface{ Step(time.Duration) }) {
	t.Helper()
	clk.Step(followPollPeriod)
	select {
	case got, ok := <-lr.lines:
		if ok {
			t.Fatalf("unexpected line %q after the container exited", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the followed stream did not end after the container exited")
	}
}

func appendFile(t *testing.T, path, data string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	if _, err := fmt.Fprint(f, data); err != nil {
		t.Fatal(err)
	}
}
