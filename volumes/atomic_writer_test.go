package volumes

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func payloadOf(files map[string]string) map[string]fileProjection {
	p := map[string]fileProjection{}
	for k, v := range files {
		p[k] = fileProjection{Data: []byte(v), Mode: 0o644}
	}
	return p
}

func TestAtomicWriterUpdates(t *testing.T) {
	tests := []struct {
		name      string
		first     map[string]string
		second    map[string]string
		wantWrite bool
	}{
		{"unchanged is not re-written", map[string]string{"a": "1", "b/c": "2"}, map[string]string{"a": "1", "b/c": "2"}, false},
		{"changed content", map[string]string{"a": "1"}, map[string]string{"a": "2"}, true},
		{"removed key", map[string]string{"a": "1", "b": "2"}, map[string]string{"a": "1"}, true},
		{"added key", map[string]string{"a": "1"}, map[string]string{"a": "1", "d/e/f": "3"}, true},
		{"nested removed", map[string]string{"a": "1", "d/e": "2", "d/f": "3"}, map[string]string{"a": "1", "d/e": "2"}, true},
		{"everything removed", map[string]string{"a": "1"}, map[string]string{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			w := &atomicWriter{dir: dir}
			if _, err := w.Write(payloadOf(tt.first), nil); err != nil {
				t.Fatal(err)
			}
			oldTs, _ := os.Readlink(filepath.Join(dir, dataDirName))
			wrote, err := w.Write(payloadOf(tt.second), nil)
			if err != nil {
				t.Fatal(err)
			}
			if wrote != tt.wantWrite {
				t.Errorf("wrote = %t, want %t", wrote, tt.wantWrite)
			}
			if got := readVolume(t, dir); !reflect.DeepEqual(got, withDefault(tt.second)) {
				t.Errorf("visible files = %v, want %v", got, tt.second)
			}
			newTs, _ := os.Readlink(filepath.Join(dir, dataDirName))
			if tt.wantWrite && exists(filepath.Join(dir, oldTs)) {
				t.Errorf("old data dir %s not removed", oldTs)
			}
			if !tt.wantWrite && newTs != oldTs {
				t.Errorf("..data moved from %s to %s without a change", oldTs, newTs)
			}
			assertOnlyOneTsDir(t, dir)
		})
	}
}

func withDefault(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

func assertOnlyOneTsDir(t *testing.T, dir string) {
	t.Helper()
	entries, _ := os.ReadDir(dir)
	var ts []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "..") && e.Name() != dataDirName {
			ts = append(ts, e.Name())
		}
	}
	if len(ts) != 1 {
		t.Errorf("timestamped dirs = %v, want exactly one", ts)
	}
}

func TestAtomicWriterLayout(t *testing.T) {
	dir := t.TempDir()
	w := &atomicWriter{dir: dir, now: func() time.Time { return testStart }}
	payload := map[string]fileProjection{"key": {Data: []byte("v"), Mode: 0o400}, "sub/file": {Data: []byte("x"), Mode: 0o644}}
	if _, err := w.Write(payload, nil); err != nil {
		t.Fatal(err)
	}
	ts, err := os.Readlink(filepath.Join(dir, dataDirName))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(ts, "..2026_11_22_10_00_00.") {
		t.Errorf("data dir = %q, want a ..2026_11_22_10_00_00.<n> timestamp", ts)
	}
	for name, want := range map[string]string{"key": "..data/key", "sub": "..data/sub"} {
		if got, _ := os.Readlink(filepath.Join(dir, name)); got != want {
			t.Errorf("%s -> %q, want %q", name, got, want)
		}
	}
	if got := modeOf(t, filepath.Join(dir, "key")).Perm(); got != 0o400 {
		t.Errorf("key mode = %v, want 0400", got)
	}
	if got := modeOf(t, filepath.Join(dir, ts)).Perm(); got != 0o755 {
		t.Errorf("data dir mode = %v, want 0755", got)
	}
}

func TestAtomicWriterRejectsBadPaths(t *testing.T) {
	for _, p := range []string{"", "/abs", "../x", "a/../../x", "..x", strings.Repeat("a", 256)} {
		t.Run(p, func(t *testing.T) {
			w := &atomicWriter{dir: t.TempDir()}
			if _, err := w.Write(payloadOf(map[string]string{p: "v"}), nil); err == nil {
				t.Errorf("path %q accepted", p)
			}
		})
	}
}

func TestAtomicWriterSetPermsFailureKeepsOldContent(t *testing.T) {
	dir := t.TempDir()
	w := &atomicWriter{dir: dir}
	if _, err := w.Write(payloadOf(map[string]string{"a": "1"}), nil); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	if _, err := w.Write(payloadOf(map[string]string{"a": "2"}), func() error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
	if got := readVolume(t, dir); got["a"] != "1" {
		t.Errorf("a = %q after a failed write, want the old content", got["a"])
	}
	assertOnlyOneTsDir(t, dir)
}

// TestAtomicWriterConcurrentReaders rewrites a set of files while readers read it: a reader that
// resolves ..data once and reads every file sees one version of the whole set, and a reader of a
// visible path always sees a complete file.
func TestAtomicWriterConcurrentReaders(t *testing.T) {
	dir := t.TempDir()
	w := &atomicWriter{dir: dir}
	keys := []string{"a", "b", "nested/c"}
	version := func(v int) map[string]fileProjection {
		p := map[string]fileProjection{}
		for _, k := range keys {
			// Large enough that a torn write would show; every byte says the version.
			p[k] = fileProjection{Data: bytes.Repeat([]byte(fmt.Sprintf("v%06d;", v)), 512), Mode: 0o644}
		}
		return p
	}
	if _, err := w.Write(version(0), nil); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var reads atomic.Int64
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(2)
		go func() { defer wg.Done(); errs <- readSets(dir, keys, &stop, &reads) }()
		go func() { defer wg.Done(); errs <- readVisible(dir, keys, &stop, &reads) }()
	}
	for v := 1; v <= 60; v++ {
		if _, err := w.Write(version(v), nil); err != nil {
			t.Fatal(err)
		}
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if reads.Load() == 0 {
		t.Fatal("readers read nothing")
	}
}

// readSets resolves ..data and reads every file of that version; all must carry the same version.
// A version removed under the reader (ENOENT) is a lost race, not an inconsistency: it retries.
func readSets(dir string, keys []string, stop *atomic.Bool, reads *atomic.Int64) error {
	for !stop.Load() {
		ts, err := os.Readlink(filepath.Join(dir, dataDirName))
		if err != nil {
			return fmt.Errorf("readlink ..data: %w", err)
		}
		var first []byte
		for _, k := range keys {
			data, err := os.ReadFile(filepath.Join(dir, ts, k))
			if errors.Is(err, fs.ErrNotExist) {
				break
			}
			if err != nil {
				return err
			}
			if err := wholeVersion(data); err != nil {
				return fmt.Errorf("%s/%s: %w", ts, k, err)
			}
			if first == nil {
				first = data
			} else if !bytes.Equal(first, data) {
				return fmt.Errorf("%s: %s holds %.8s, another file %.8s", ts, k, data, first)
			}
		}
		reads.Add(1)
	}
	return nil
}

// readVisible reads each user-visible path: it must hold one complete version. (A lookup racing the
// removal of the version it resolved can miss the file; the reader then reads again.)
func readVisible(dir string, keys []string, stop *atomic.Bool, reads *atomic.Int64) error {
	for !stop.Load() {
		for _, k := range keys {
			data, err := os.ReadFile(filepath.Join(dir, k))
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return fmt.Errorf("read %s: %w", k, err)
			}
			if err := wholeVersion(data); err != nil {
				return fmt.Errorf("%s: %w", k, err)
			}
		}
		reads.Add(1)
	}
	return nil
}

func wholeVersion(data []byte) error {
	const unit = len("v000000;")
	if len(data) != 512*unit {
		return fmt.Errorf("torn file: %d bytes", len(data))
	}
	if !bytes.Equal(data, bytes.Repeat(data[:unit], 512)) {
		return errors.New("file mixes versions")
	}
	return nil
}
