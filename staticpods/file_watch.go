package staticpods

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
	"k8s.io/apimachinery/pkg/util/sets"
)

// ensureWatch starts watching the path's directory (a single file's parent) if it exists and is not
// watched yet.
func (r *fileReader) ensureWatch() {
	if r.watcher != nil {
		return
	}
	info, err := os.Stat(r.path)
	if err != nil {
		return // resync reported it; the next period tries again
	}
	dir := r.path
	if !info.IsDir() {
		dir = filepath.Dir(r.path)
	}
	w, err := fsnotify.NewWatcher()
	if err == nil {
		err = w.Add(dir)
		if err != nil {
			_ = w.Close()
		}
	}
	if err != nil {
		r.faults.fault(watchFaultKey, ReasonFailedToRead, fmt.Sprintf("watching static pod path %s: %v; re-reading it every %s", dir, err, r.period))
		return
	}
	r.faults.clear(watchFaultKey)
	r.watcher, r.watchDir = w, dir
}

func (r *fileReader) stop() {
	r.dropWatch()
	if r.timer != nil {
		r.timer.Stop()
	}
}

func (r *fileReader) dropWatch() {
	if r.watcher != nil {
		_ = r.watcher.Close()
		r.watcher = nil
	}
}

func (r *fileReader) watchEvents() <-chan fsnotify.Event {
	if r.watcher == nil {
		return nil
	}
	return r.watcher.Events
}

func (r *fileReader) watchErrors() <-chan error {
	if r.watcher == nil {
		return nil
	}
	return r.watcher.Errors
}

func (r *fileReader) debounced() <-chan time.Time {
	if r.timer == nil {
		return nil
	}
	return r.timer.C()
}

// onEvent queues the file an event names for a re-read; an event on the watched directory itself (removed
// or renamed) drops the watch and re-reads everything.
func (r *fileReader) onEvent(ev fsnotify.Event, ok bool) {
	switch {
	case !ok:
		r.dropWatch()
	case ev.Name == r.watchDir:
		r.dropWatch()
		r.resync()
	case r.wants(ev.Name):
		r.pending.Insert(ev.Name)
		if r.timer == nil {
			r.timer = r.clock.NewTimer(debounceDelay)
		}
	}
}

// wants reports whether a file in the watched directory is a manifest of this source.
func (r *fileReader) wants(name string) bool {
	if filepath.Dir(name) != r.watchDir || strings.HasPrefix(filepath.Base(name), ".") {
		return false
	}
	return r.watchDir == r.path || name == r.path
}

func (r *fileReader) onWatchError(err error, ok bool) {
	if !ok {
		r.dropWatch()
		return
	}
	if errors.Is(err, fsnotify.ErrEventOverflow) {
		r.resync() // events were lost: read everything
		return
	}
	r.faults.fault(watchFaultKey, ReasonFailedToRead, fmt.Sprintf("watching static pod path %s: %v; re-reading it every %s", r.watchDir, err, r.period))
	r.dropWatch()
}

// flush re-reads the files queued by events.
func (r *fileReader) flush() {
	r.timer = nil
	files := sets.List(r.pending)
	r.pending = sets.New[string]()
	for _, p := range files {
		r.syncFile(p)
	}
}
