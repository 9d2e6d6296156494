package agent

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-logr/logr"

	"github.com/nodelet/nodelet/config"
	"github.com/nodelet/nodelet/lockfile"
)

// NodeLock is the node's --lock-file, held while the node runs (see package lockfile).
type NodeLock struct {
	lock      *lockfile.Lock
	contended <-chan struct{}
}

// Lock takes the configured lock file before anything binds a port or touches the node, waiting while
// another agent (a kubelet, or a nodelet being replaced) holds it; with --exit-on-lock-contention it
// watches for the next agent. Without --lock-file it returns a NodeLock that holds nothing.
func Lock(ctx context.Context, cfg *config.Config, log logr.Logger) (*NodeLock, error) {
	if cfg.LockFile == "" {
		return &NodeLock{}, nil
	}
	log.Info("Acquiring file lock", "path", cfg.LockFile)
	l, err := lockfile.Acquire(ctx, cfg.LockFile)
	if err != nil {
		return nil, fmt.Errorf("unable to acquire file lock on %q: %w", cfg.LockFile, err)
	}
	nl := &NodeLock{lock: l}
	if cfg.ExitOnLockContention {
		log.Info("Watching for inotify events", "path", cfg.LockFile)
		var ignore func() bool
		if cfg.LockContentionIgnoresKubelet {
			ignore = func() bool {
				waiting := lockfile.OnlyKubeletsWaiting("/proc", cfg.LockFile)
				if waiting {
					log.Info("A kubelet opened the lock file: it waits for the node, which goes back to it when nodelet exits", "path", cfg.LockFile)
				}
				return waiting
			}
		}
		if nl.contended, err = lockfile.WatchContentionUnless(ctx, cfg.LockFile, ignore); err != nil {
			_ = l.Release()
			return nil, err
		}
	}
	return nl, nil
}

// Context returns a context that ends with ctx or when another agent asks for the lock, and a function
// telling whether it ended for that reason.
func (l *NodeLock) Context(ctx context.Context) (context.Context, func() bool) {
	if l.contended == nil {
		return ctx, func() bool { return false }
	}
	ctx, cancel := context.WithCancelCause(ctx)
	go func() {
		select {
		case <-l.contended:
			cancel(errLockContention)
		case <-ctx.Done():
		}
	}()
	return ctx, func() bool { return errors.Is(context.Cause(ctx), errLockContention) }
}

var errLockContention = errors.New("lock file contention")

// Release gives the lock up (a no-op without a lock file).
func (l *NodeLock) Release() {
	if l.lock != nil {
		_ = l.lock.Release()
	}
}
