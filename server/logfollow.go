package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/fsnotify/fsnotify"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
)

// readLogs writes the target's log to out as opts say. Reaching limitBytes is a normal end.
func (s logHandlers) readLogs(ctx context.Context, t logTarget, opts logOptions, out io.Writer) error {
	f, err := openAtTail(t.path, opts.tail)
	if err != nil {
		return fmt.Errorf("failed to open log file %q: %w", t.path, err)
	}
	w := newLogWriter(opts, out)
	if opts.follow {
		err = s.follow(ctx, t, f, w)
	} else {
		err = readOnce(f, w, opts.tail)
		_ = f.Close()
	}
	if errors.Is(err, errLimit) {
		return nil
	}
	return err
}

// readOnce writes the file to its end (at most tail records); an unterminated last record is written too.
func readOnce(f *os.File, w *logWriter, tail int64) error {
	var partial []byte
	if err := copyRecords(bufio.NewReader(f), w, &partial, &tail); err != nil {
		return err
	}
	if len(partial) > 0 && tail != 0 {
		return w.writeLine(partial)
	}
	return nil
}

// follower keeps reading one container's log: through rotations (the renamed file is drained before the
// new one is opened) until the container has exited and everything it wrote has been written.
type follower struct {
	s       *Server
	t       logTarget
	w       *logWriter
	f       *os.File
	r       *bufio.Reader
	partial []byte
}

func (s logHandlers) follow(ctx context.Context, t logTarget, f *os.File, w *logWriter) error {
	fl := &follower{s: s.Server, t: t, w: w, f: f, r: bufio.NewReader(f)}
	defer func() { _ = fl.f.Close() }()
	wk := s.newWaker(ctx, filepath.Dir(t.path))
	defer wk.stop()
	exited := false
	for {
		if err := fl.drain(); err != nil || exited {
			return err
		}
		switched, err := fl.reopenIfRotated()
		if err != nil {
			return err
		}
		if switched {
			continue
		}
		running, err := s.containerRunning(ctx, t.containerID)
		if err != nil {
			return err
		}
		// After the container ended, read once more: what it wrote last is in the file now.
		exited = !running
		if running && !wk.wait(ctx) {
			return nil
		}
	}
}

func (fl *follower) drain() error {
	unlimited := int64(-1)
	return copyRecords(fl.r, fl.w, &fl.partial, &unlimited)
}

// reopenIfRotated switches to a new file at the log path. A rotation in progress is waited for, and the old
// file, complete once the runtime has reopened its log, is read to its end first.
func (fl *follower) reopenIfRotated() (bool, error) {
	if fl.samePath() {
		return false, nil
	}
	fl.s.rotating.RLock()
	fl.s.rotating.RUnlock() //nolint:staticcheck // an empty critical section: wait for the rotation to finish
	if err := fl.drain(); err != nil {
		return false, err
	}
	nf, err := os.Open(fl.t.path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil // renamed by someone else, not reopened yet
	}
	if err != nil {
		return false, fmt.Errorf("failed to open log file %q: %w", fl.t.path, err)
	}
	_ = fl.f.Close()
	fl.f, fl.partial = nf, nil
	fl.r.Reset(nf)
	return true, nil
}

// samePath tells whether the open file is still the one at the log path.
func (fl *follower) samePath() bool {
	open, err := fl.f.Stat()
	if err != nil {
		return true
	}
	cur, err := os.Stat(fl.t.path)
	return err == nil && os.SameFile(open, cur)
}

// waker wakes a follower when the log directory changes, and at least every followPollPeriod.
type waker struct {
	watcher *fsnotify.Watcher
	ticker  clock.Ticker
}

func (s logHandlers) newWaker(ctx context.Context, dir string) *waker {
	wk := &waker{ticker: s.opts.Clock.NewTicker(followPollPeriod)}
	w, err := fsnotify.NewWatcher()
	if err == nil {
		err = w.Add(dir)
		if err != nil {
			_ = w.Close()
		}
	}
	if err != nil {
		ctrl.LoggerFrom(ctx).V(2).Info("Watching the log directory failed: polling it", "dir", dir, "err", err.Error())
		return wk
	}
	wk.watcher = w
	return wk
}

// wait returns at the next change or tick; false when ctx ended.
func (wk *waker) wait(ctx context.Context) bool {
	var events <-chan fsnotify.Event
	var errs <-chan error
	if wk.watcher != nil {
		events, errs = wk.watcher.Events, wk.watcher.Errors
	}
	select {
	case <-ctx.Done():
		return false
	case <-events:
	case err := <-errs:
		ctrl.LoggerFrom(ctx).V(4).Info("Watch error on the log directory", "err", err.Error())
	case <-wk.ticker.C():
	}
	return true
}

func (wk *waker) stop() {
	wk.ticker.Stop()
	if wk.watcher != nil {
		_ = wk.watcher.Close()
	}
}
