package csi

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/fsnotify/fsnotify"
	"github.com/go-logr/logr"
)

// watch keeps the set of plugin sockets under the watcher's directory (and its subdirectories, watched
// as they appear) in w.desired until ctx ends: the sockets there at start, then each one created or
// removed. Names starting with "." and files that are no sockets are ignored, as the kubelet's plugin
// watcher does.
func (w *PluginWatcher) watch(ctx context.Context, fw *fsnotify.Watcher) {
	log := logr.FromContextOrDiscard(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-fw.Events:
			if !ok {
				return
			}
			w.handleEvent(ctx, fw, ev)
		case err, ok := <-fw.Errors:
			if !ok {
				return
			}
			log.Error(err, "Watching the plugin registration directory failed", "path", w.Dir)
		}
	}
}

func (w *PluginWatcher) handleEvent(ctx context.Context, fw *fsnotify.Watcher, ev fsnotify.Event) {
	switch {
	case ev.Has(fsnotify.Create):
		if err := w.created(ctx, fw, ev.Name); err != nil {
			logr.FromContextOrDiscard(ctx).Error(err, "Handling a new plugin socket failed", "path", ev.Name)
		}
	case ev.Has(fsnotify.Remove), ev.Has(fsnotify.Rename):
		w.gone(ev.Name)
	}
}

// created handles a new entry: a directory is watched and scanned, a socket becomes a plugin to register.
func (w *PluginWatcher) created(ctx context.Context, fw *fsnotify.Watcher, path string) error {
	if strings.HasPrefix(filepath.Base(path), ".") {
		return nil
	}
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // gone already: its Remove event follows
	}
	if err != nil {
		return fmt.Errorf("stat %s: %w", path, err)
	}
	switch {
	case fi.IsDir():
		return w.scan(ctx, fw, path)
	case fi.Mode()&fs.ModeSocket != 0:
		w.socketCreated(path, inode(fi))
	default:
		logr.FromContextOrDiscard(ctx).V(5).Info("Ignoring a file that is no socket", "path", path)
	}
	return nil
}

// scan watches dir and the directories under it and takes the sockets found there as created. Only dir
// itself failing is an error; a subdirectory that cannot be read is logged.
func (w *PluginWatcher) scan(ctx context.Context, fw *fsnotify.Watcher, dir string) error {
	if err := fw.Add(dir); err != nil {
		return fmt.Errorf("watch %s: %w", dir, err)
	}
	log := logr.FromContextOrDiscard(ctx)
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil && path == dir:
			return fmt.Errorf("read %s: %w", dir, err)
		case err != nil:
			log.Error(err, "Reading the plugin registration directory failed", "path", path)
			return nil
		case path == dir:
			return nil
		case strings.HasPrefix(d.Name(), "."):
			return skip(d)
		case d.IsDir():
			if err := fw.Add(path); err != nil {
				log.Error(err, "Watching a plugin directory failed", "path", path)
			}
		case d.Type()&fs.ModeSocket != 0:
			if fi, err := d.Info(); err == nil {
				w.socketCreated(path, inode(fi))
			}
		}
		return nil
	})
}

// inode is a file's inode number (0 where the platform has none).
func inode(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ino
	}
	return 0
}

// skip leaves out a hidden entry: a directory's whole tree.
func skip(d fs.DirEntry) error {
	if d.IsDir() {
		return filepath.SkipDir
	}
	return nil
}
