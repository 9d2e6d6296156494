//go:build linux

package lockfile

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestHandover is the kubelet's protocol between two holders: the second opens the file and waits in
// flock; the first sees the open, lets go, and the second gets the lock.
func TestHandover(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	path := filepath.Join(t.TempDir(), "kubelet.lock")
	first, err := Acquire(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	contended, err := WatchContention(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *Lock, 1)
	go func() {
		l, err := Acquire(ctx, path)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	select {
	case <-contended:
	case <-ctx.Done():
		t.Fatal("the holder never saw the second process open the lock file")
	}
	select {
	case <-got:
		t.Fatal("the second holder got the lock while the first still held it")
	default:
	}
	if err := first.Release(); err != nil {
		t.Fatal(err)
	}
	second := <-got
	if second == nil {
		t.Fatal("no lock for the second holder")
	}
	_ = second.Release()
}

func TestAcquireGivesUpWithItsContext(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kubelet.lock")
	l, err := Acquire(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Release() }()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := Acquire(ctx, path)
		errc <- err
	}()
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("Acquire of a held lock succeeded after its context ended")
	}
}

func TestWatchEndsWithContext(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kubelet.lock")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	contended, err := WatchContention(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case <-contended:
		t.Fatal("contention reported without any")
	case <-time.After(100 * time.Millisecond):
	}
}

// A kubelet waiting for the lock (its supervisor restarted it) is told apart from any other opener, through
// the processes' open files in /proc.
func TestOnlyKubeletsWaiting(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "kubelet.lock")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep binary")
	}
	data, err := os.ReadFile(sleep)
	if err != nil {
		t.Fatal(err)
	}
	holder := func(name string) func() {
		bin := filepath.Join(dir, name)
		if err := os.WriteFile(bin, data, 0o755); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "30")
		cmd.Stdin = f // the lock file open in the child, as a waiting kubelet holds it
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		_ = f.Close()
		return func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
	}
	if !OnlyKubeletsWaiting("/proc", path) {
		t.Error("nobody holds the file: want true")
	}
	stopKubelet := holder("kubelet")
	defer stopKubelet()
	if !OnlyKubeletsWaiting("/proc", path) {
		t.Error("a kubelet holds the file: want true")
	}
	stopOther := holder("nodelet")
	defer stopOther()
	if OnlyKubeletsWaiting("/proc", path) {
		t.Error("a kubelet and another process hold the file: want false")
	}
}
