//go:build linux

package lockfile

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/utils/clock"

	"github.com/nodelet/nodelet/internal/periodic"
)

// Lock is a held lock file. The lock lasts until Release or the process ends.
type Lock struct {
	f *os.File
}

// pollInterval is how often Acquire tries a held lock again.
const pollInterval = 50 * time.Millisecond

// Acquire opens (creating it if needed) the file at path and takes an exclusive flock on it, waiting as
// long as another process holds it, as the kubelet does. Opening the file is what tells a holder that
// watches for contention to let go. The lock is tried again every 50 ms, so ctx can end the wait.
func Acquire(ctx context.Context, path string) (*Lock, error) {
	return acquire(ctx, path, clock.RealClock{})
}

func acquire(ctx context.Context, path string, clk clock.WithTicker) (*Lock, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600) //nolint:gosec // the path is the operator's --lock-file
	if err != nil {
		return nil, fmt.Errorf("open lock file %s: %w", path, err)
	}
	var lockErr error
	try := func() bool {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err != nil && !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			lockErr = fmt.Errorf("lock %s: %w", path, err)
		}
		return err == nil || lockErr != nil
	}
	if !try() && !periodic.Until(ctx, clk, pollInterval, 0, try) {
		_ = f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, ctx.Err())
	}
	if lockErr != nil {
		_ = f.Close()
		return nil, lockErr
	}
	return &Lock{f: f}, nil
}

// Release gives the lock up.
func (l *Lock) Release() error { return l.f.Close() }

// WatchContention reports on the returned channel (closed once) when another process opens the lock file
// (or the file's inode is deleted, which needs the holder to have let go): the kubelet's
// --exit-on-lock-contention, with the kubelet's inotify events. Call it after Acquire, so the holder's
// own open is not seen. The watch ends with ctx.
func WatchContention(ctx context.Context, path string) (<-chan struct{}, error) {
	return WatchContentionUnless(ctx, path, nil)
}

// WatchContentionUnless is WatchContention that goes on watching after an event for which ignore (nil:
// never) returns true.
func WatchContentionUnless(ctx context.Context, path string, ignore func() bool) (<-chan struct{}, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("inotify: %w", err)
	}
	if _, err := unix.InotifyAddWatch(fd, path, unix.IN_OPEN|unix.IN_DELETE_SELF); err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("watch lock file %s: %w", path, err)
	}
	contended := make(chan struct{})
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		buf := make([]byte, unix.SizeofInotifyEvent+unix.NAME_MAX+1)
		for {
			n, err := unix.Read(fd, buf)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil || n <= 0 {
				return // closed because ctx ended
			}
			if ignore != nil && ignore() {
				continue
			}
			close(contended)
			return
		}
	}()
	go func() {
		select {
		case <-ctx.Done():
		case <-readDone:
		}
		_ = unix.Close(fd) // ends a Read still waiting
	}()
	return contended, nil
}

// OnlyKubeletsWaiting reports whether every other process that has path open (seen through procRoot,
// "/proc") is a kubelet: a kubelet restarted by its supervisor, waiting for the lock. It reads the
// processes' open files, which needs the host's PID namespace and root. A process it cannot read counts as
// not a kubelet.
func OnlyKubeletsWaiting(procRoot, path string) bool {
	target, err := filepath.EvalSymlinks(path)
	if err != nil {
		return false
	}
	entries, err := os.ReadDir(procRoot)
	if err != nil {
		return false
	}
	self := strconv.Itoa(os.Getpid())
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil || e.Name() == self {
			continue
		}
		if !hasOpen(filepath.Join(procRoot, e.Name(), "fd"), target) {
			continue
		}
		comm, err := os.ReadFile(filepath.Join(procRoot, e.Name(), "comm"))
		if err != nil || strings.TrimSpace(string(comm)) != "kubelet" {
			return false
		}
	}
	return true
}

// hasOpen reports whether a process's fd directory holds a descriptor of target.
func hasOpen(fdDir, target string) bool {
	fds, err := os.ReadDir(fdDir)
	if err != nil {
		return false
	}
	for _, fd := range fds {
		if link, err := os.Readlink(filepath.Join(fdDir, fd.Name())); err == nil && link == target {
			return true
		}
	}
	return false
}
