package server

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// newRotationEnv has container c1 (running) logging to dir/0.log, the runtime recreating the file on reopen.
func newRotationEnv(t *testing.T, maxSize string, maxFiles int32) (*env, string) {
	e := newEnv(t, func(o *Options) { o.ContainerLogMaxSize, o.ContainerLogMaxFiles = maxSize, maxFiles })
	pod := testPod("web", "u1")
	path := filepath.Join(e.s.opts.PodLogsDir, "default_web_u1", "app", "0.log")
	e.rt.addContainer("c1", "sb1", &pod, "app", runtimeapi.ContainerState_CONTAINER_RUNNING, 1, path)
	e.rt.reopen = func(string) error { writeFile(t, path, nil); return nil }
	return e, path
}

func logFiles(t *testing.T, path string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestRotationKeepsMaxFilesAndReopens(t *testing.T) {
	e, path := newRotationEnv(t, "100", 3)
	writeFile(t, path+".20260101-000000", []byte("oldest\n"))
	writeFile(t, path+".20260101-000001.gz", []byte("gz"))
	writeFile(t, path+".20260101-000002", []byte("newest rotated\n"))
	writeFile(t, path+".20260101-000002.gz.tmp", []byte("leftover"))
	writeFile(t, path, bytes.Repeat([]byte("x"), 100))

	e.s.rot().rotateOnce(context.Background())

	now := e.clock.Now().Format(rotatedTimeFormat)
	want := []string{"0.log", "0.log.20260101-000002.gz", "0.log." + now}
	if got := logFiles(t, path); !slices.Equal(got, want) {
		t.Fatalf("files after rotation %v, want %v (maxFiles 3)", got, want)
	}
	if got := e.rt.reopenedIDs(); !slices.Equal(got, []string{"c1"}) {
		t.Errorf("ReopenContainerLog calls %v, want [c1]", got)
	}
	if got := gunzip(t, path+".20260101-000002.gz"); got != "newest rotated\n" {
		t.Errorf("compressed rotated log holds %q", got)
	}
	if b, _ := os.ReadFile(path + "." + now); len(b) != 100 {
		t.Errorf("the rotated file has %d bytes, want the 100 of the old current file", len(b))
	}
}

func TestRotationLeavesSmallLogsAlone(t *testing.T) {
	e, path := newRotationEnv(t, "1Ki", 5)
	writeFile(t, path, []byte("small\n"))
	e.s.rot().rotateOnce(context.Background())
	if got := logFiles(t, path); !slices.Equal(got, []string{"0.log"}) || len(e.rt.reopenedIDs()) != 0 {
		t.Errorf("files %v, reopened %v: a log under containerLogMaxSize must stay", got, e.rt.reopenedIDs())
	}
}

func TestRotationRenamesBackWhenReopenFails(t *testing.T) {
	e, path := newRotationEnv(t, "10", 5)
	e.rt.reopen = func(string) error { return errors.New("runtime down") }
	writeFile(t, path, []byte(strings.Repeat("y", 20)))
	e.s.rot().rotateOnce(context.Background())
	if got := logFiles(t, path); !slices.Equal(got, []string{"0.log"}) {
		t.Errorf("files %v: the current log must be renamed back when the runtime cannot reopen it", got)
	}
}

func TestRotationRunsEveryTenSeconds(t *testing.T) {
	e, path := newRotationEnv(t, "10", 2)
	reopened := make(chan struct{}, 1)
	e.rt.reopen = func(string) error { writeFile(t, path, nil); reopened <- struct{}{}; return nil }
	writeFile(t, path, []byte(strings.Repeat("z", 20)))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.s.rot().rotateLogs(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	waitForTicker(t, e)
	e.clock.Step(rotationPeriod - time.Second)
	select {
	case <-reopened:
		t.Fatal("rotated before the rotation period")
	default:
	}
	e.clock.Step(time.Second)
	select {
	case <-reopened:
	case <-time.After(10 * time.Second):
		t.Fatal("no rotation after the rotation period")
	}
	if got := logFiles(t, path); len(got) != 2 {
		t.Errorf("files %v, want the new log and one rotated", got)
	}
}

// waitForTicker waits (bounded) until the goroutine under test has created its ticker.
func waitForTicker(t *testing.T, e *env) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !e.clock.HasWaiters() {
		if time.Now().After(deadline) {
			t.Fatal("the rotation loop never started its ticker")
		}
		runtime.Gosched()
	}
}

func gunzip(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(zr)
	return string(b)
}
