package staticpods

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/clock"

	"github.com/nodelet/nodelet/internal/periodic"
)

const (
	// DefaultCheckPeriod is the kubelet's default fileCheckFrequency and httpCheckFrequency.
	DefaultCheckPeriod = 20 * time.Second
	// debounceDelay gathers the burst of events an editor or a copy makes before a file is re-read.
	debounceDelay = 100 * time.Millisecond
)

// errGone: the manifest file no longer exists.
var errGone = errors.New("manifest removed")

// FileSource reads static pods from staticPodPath: a directory (every file in it whose name does not start
// with ".", not recursing) or a single file. It is a manager.Runnable.
type FileSource struct {
	Path     string           // staticPodPath: a directory or a single file
	Period   time.Duration    // fileCheckFrequency (default 20s): full re-read
	NodeName string           // default: the Store's
	Clock    clock.WithTicker // default: the real clock
	Store    *Store
	Report   Reporter
	// UIDs computes the pods' UIDs (nil: staticpods' own hash); kubeletuid.UIDs gives the kubelet's.
	UIDs UIDFunc

	resynced func() // test hook: called after each periodic re-read
}

// Start reads the path at once, then keeps the Store up to date until ctx ends: files are re-read (after
// a short debounce) when fsnotify reports them created, written, chmod-ed, removed or renamed, and the
// whole path every Period so nothing is missed. A missing path is reported and polled; it is watched once
// it appears. Each file is the Store source "file:<path>". Start returns nil when ctx ends.
func (f *FileSource) Start(ctx context.Context) error {
	if f.Store == nil {
		return errors.New("staticpods: FileSource needs a Store")
	}
	r := newFileReader(f, logr.FromContextOrDiscard(ctx))
	defer r.stop()
	ticker := r.clock.NewTicker(r.period)
	defer ticker.Stop()
	r.ensureWatch() // before reading, so no change slips between the read and the watch
	r.resync()
	r.store.markSeen(SourceFile)
	resync := periodic.Measured(ctx, "static-pods-file", func(context.Context) {
		r.ensureWatch()
		r.resync()
	})
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C():
			resync(ctx)
			if f.resynced != nil {
				f.resynced()
			}
		case ev, ok := <-r.watchEvents():
			r.onEvent(ev, ok)
		case err, ok := <-r.watchErrors():
			r.onWatchError(err, ok)
		case <-r.debounced():
			r.flush()
		}
	}
}

// NeedLeaderElection is false: every node reads its own manifests.
func (f *FileSource) NeedLeaderElection() bool { return false }

// fileReader is FileSource's state, owned by its Start goroutine.
type fileReader struct {
	path     string
	rawPath  string // the configured path without trailing separators, as the kubelet hashes it
	uids     UIDFunc
	nodeName string
	period   time.Duration
	clock    clock.WithTicker
	store    *Store
	faults   *faultLog
	log      logr.Logger

	known    sets.Set[string] // files whose pods were handed to the store
	watcher  *fsnotify.Watcher
	watchDir string           // the directory watched: path, or a single file's parent
	pending  sets.Set[string] // files to re-read when the debounce timer fires
	timer    clock.Timer
}

func newFileReader(f *FileSource, log logr.Logger) *fileReader {
	r := &fileReader{
		path:     filepath.Clean(f.Path),
		rawPath:  strings.TrimRight(f.Path, string(filepath.Separator)),
		uids:     f.UIDs,
		nodeName: f.NodeName,
		period:   f.Period,
		clock:    f.Clock,
		store:    f.Store,
		faults:   newFaultLog(f.Report),
		log:      log,
		known:    sets.New[string](),
		pending:  sets.New[string](),
	}
	if r.nodeName == "" {
		r.nodeName = f.Store.NodeName()
	}
	if r.period <= 0 {
		r.period = DefaultCheckPeriod
	}
	if r.clock == nil {
		r.clock = clock.RealClock{}
	}
	return r
}

const (
	pathFaultKey  = "\x00path"
	watchFaultKey = "\x00watch"
)

// resync re-reads the whole path. A missing path removes its pods (as the kubelet); a path that cannot be
// read keeps them.
func (r *fileReader) resync() {
	info, err := os.Stat(r.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		r.faults.fault(pathFaultKey, ReasonPathNotFound, fmt.Sprintf("static pod path %s does not exist, polling it", r.path))
		r.removeAllExcept(nil)
	case err != nil:
		r.faults.fault(pathFaultKey, ReasonFailedToRead, fmt.Sprintf("static pod path %s: %v", r.path, err))
	case info.IsDir():
		r.resyncDir()
	default:
		r.faults.clear(pathFaultKey)
		r.syncFile(r.path)
		r.removeAllExcept(sets.New(r.path))
	}
}

func (r *fileReader) resyncDir() {
	entries, err := os.ReadDir(r.path)
	if err != nil {
		r.faults.fault(pathFaultKey, ReasonFailedToRead, fmt.Sprintf("static pod path %s: %v", r.path, err))
		return
	}
	r.faults.clear(pathFaultKey)
	present := sets.New[string]()
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		p := filepath.Join(r.path, e.Name())
		present.Insert(p)
		r.syncFile(p)
	}
	r.removeAllExcept(present)
}

// removeAllExcept removes the pods of every known file not in keep, and forgets their faults.
func (r *fileReader) removeAllExcept(keep sets.Set[string]) {
	for _, p := range sets.List(r.known) {
		if !keep.Has(p) {
			r.remove(p)
		}
	}
	for key := range r.faults.last {
		if !strings.HasPrefix(key, "\x00") && !keep.Has(key) {
			r.faults.clear(key)
		}
	}
}

func (r *fileReader) remove(p string) {
	r.faults.clear(p)
	if r.known.Has(p) {
		r.known.Delete(p)
		r.store.Update(fileSourceKey(p), nil)
		r.log.V(1).Info("Static pod manifest removed", "path", p)
	}
}

// fileSourceKey is the Store source of one manifest file.
func fileSourceKey(p string) string { return SourceFile + ":" + p }

// syncFile re-reads one file: its pods replace the previous ones; a failure is reported and keeps them.
func (r *fileReader) syncFile(p string) {
	pods, err := r.readFile(p)
	switch {
	case errors.Is(err, errGone):
		r.remove(p)
	case err != nil:
		r.faults.fault(p, reasonFor(err), fmt.Sprintf("static pod manifest %s: %v", p, err))
	default:
		r.faults.clear(p)
		r.known.Insert(p)
		r.store.Update(fileSourceKey(p), pods)
		r.log.V(1).Info("Static pod manifest read", "path", p, "pods", len(pods))
	}
}

func (r *fileReader) readFile(p string) ([]*corev1.Pod, error) {
	data, err := readManifest(p)
	if errors.Is(err, fs.ErrNotExist) {
		if _, lerr := os.Lstat(p); errors.Is(lerr, fs.ErrNotExist) {
			return nil, errGone
		}
	}
	if err != nil {
		return nil, err
	}
	source := p
	if p == r.path {
		source = r.rawPath // a staticPodPath naming one file enters the kubelet's hash as configured
	}
	return DecodeWith(data, r.nodeName, source, r.uids)
}

// readManifest reads a regular file of at most MaxManifestBytes. It opens without blocking, so a FIFO
// cannot hang the source.
func readManifest(p string) ([]byte, error) {
	file, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	info, err := file.Stat()
	switch {
	case err != nil:
		return nil, err
	case info.IsDir():
		return nil, errors.New("is a directory, not recursing into it")
	case !info.Mode().IsRegular():
		return nil, fmt.Errorf("not a regular file (mode %s)", info.Mode())
	}
	data, err := io.ReadAll(io.LimitReader(file, MaxManifestBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxManifestBytes {
		return nil, fmt.Errorf("%w: over %d bytes", ErrTooLarge, MaxManifestBytes)
	}
	return data, nil
}
