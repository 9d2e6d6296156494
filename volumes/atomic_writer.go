package volumes

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

const (
	dataDirName    = "..data"
	newDataDirName = "..data_tmp"
	maxFileNameLen = 255
	maxPathLen     = 4096
)

// fileProjection is one file of a volume's payload.
type fileProjection struct {
	Data []byte
	Mode int32
}

// atomicWriter projects a set of files into dir so that a reader never sees a half-written set, as
// the kubelet's AtomicWriter: the files live in a hidden timestamped directory, dir/..data is a
// symlink to it and the user-visible names are symlinks through ..data:
//
//	dir/..2026_11_22_10_00_00.123456789/key   the content
//	dir/..data -> ..2026_11_22_10_00_00.123456789
//	dir/key    -> ..data/key
//
// An update writes a new timestamped directory, swaps ..data with a rename (atomic), adds the new
// visible names, removes the names no longer in the payload and then the old directory. Names starting
// with ".." are reserved. It is not safe for concurrent writers: the caller serializes writes.
type atomicWriter struct {
	dir string
	now func() time.Time
}

// Write projects payload into the writer's directory if it differs from what is there. setPerms, if
// set, runs on the new content before it is published. It reports whether it wrote.
func (w *atomicWriter) Write(payload map[string]fileProjection, setPerms func() error) (bool, error) {
	clean, err := validatePayload(payload)
	if err != nil {
		return false, err
	}
	oldTs, err := w.currentTsDir()
	if err != nil {
		return false, err
	}
	var stale []string
	if oldTs != "" {
		oldPath := filepath.Join(w.dir, oldTs)
		if stale, err = pathsToRemove(clean, oldPath); err != nil {
			return false, err
		}
		changed, err := payloadChanged(clean, oldPath)
		if err != nil {
			return false, err
		}
		if !changed && len(stale) == 0 {
			// Up to date; still make sure every visible name exists.
			return false, w.createVisible(clean)
		}
	}
	if err := w.publish(clean, setPerms); err != nil {
		return false, err
	}
	if err := w.createVisible(clean); err != nil {
		return true, err
	}
	if err := w.removeVisible(stale); err != nil {
		return true, err
	}
	if oldTs != "" {
		return true, os.RemoveAll(filepath.Join(w.dir, oldTs))
	}
	return true, nil
}

// publish writes the payload to a new timestamped directory and points ..data at it.
func (w *atomicWriter) publish(payload map[string]fileProjection, setPerms func() error) error {
	tsDir, err := w.newTsDir()
	if err != nil {
		return err
	}
	err = writePayload(payload, tsDir)
	if err == nil && setPerms != nil {
		err = setPerms()
	}
	if err == nil {
		err = w.swap(filepath.Base(tsDir))
	}
	if err != nil {
		_ = os.RemoveAll(tsDir)
	}
	return err
}

// swap atomically points ..data at tsName.
func (w *atomicWriter) swap(tsName string) error {
	tmp := filepath.Join(w.dir, newDataDirName)
	_ = os.Remove(tmp) // left over from an interrupted write
	if err := os.Symlink(tsName, tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(w.dir, dataDirName)); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}

// currentTsDir is the name ..data points at, "" when there is none yet.
func (w *atomicWriter) currentTsDir() (string, error) {
	ts, err := os.Readlink(filepath.Join(w.dir, dataDirName))
	if os.IsNotExist(err) {
		return "", nil
	}
	return ts, err
}

// newTsDir creates ..<UTC timestamp>.<random> with mode 0755 (whatever the umask).
func (w *atomicWriter) newTsDir() (string, error) {
	now := time.Now
	if w.now != nil {
		now = w.now
	}
	dir, err := os.MkdirTemp(w.dir, now().UTC().Format("..2006_01_02_15_04_05."))
	if err != nil {
		return "", err
	}
	return dir, os.Chmod(dir, 0o755)
}

// writePayload writes every file of the payload under dir with its mode (whatever the umask).
func writePayload(payload map[string]fileProjection, dir string) error {
	for name, f := range payload {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		mode := os.FileMode(f.Mode) & (os.ModePerm | os.ModeSetuid | os.ModeSetgid | os.ModeSticky)
		if err := os.WriteFile(path, f.Data, mode); err != nil {
			return err
		}
		if err := os.Chmod(path, mode); err != nil {
			return err
		}
	}
	return nil
}

// createVisible creates, for each top-level name of the payload, the symlink name -> ..data/name.
func (w *atomicWriter) createVisible(payload map[string]fileProjection) error {
	for name := range payload {
		top, _, _ := strings.Cut(name, string(os.PathSeparator))
		visible := filepath.Join(w.dir, top)
		if _, err := os.Lstat(visible); err == nil {
			continue
		}
		if err := os.Symlink(filepath.Join(dataDirName, top), visible); err != nil && !os.IsExist(err) {
			return err
		}
	}
	return nil
}

// removeVisible removes the top-level visible names no longer in the payload.
func (w *atomicWriter) removeVisible(paths []string) error {
	for _, p := range paths {
		if strings.Contains(p, string(os.PathSeparator)) {
			continue
		}
		if err := os.Remove(filepath.Join(w.dir, p)); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	return nil
}

// payloadChanged says whether any file of the payload is missing from oldDir or has other content.
func payloadChanged(payload map[string]fileProjection, oldDir string) (bool, error) {
	for name, f := range payload {
		data, err := os.ReadFile(filepath.Join(oldDir, name))
		if os.IsNotExist(err) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		if !bytes.Equal(data, f.Data) {
			return true, nil
		}
	}
	return false, nil
}

// pathsToRemove lists what oldDir holds (relative paths) that the payload no longer does, directories
// that still lead to a payload file excepted.
func pathsToRemove(payload map[string]fileProjection, oldDir string) ([]string, error) {
	keep := map[string]bool{}
	for name := range payload {
		for p := name; p != "." && p != string(os.PathSeparator); p = filepath.Dir(p) {
			keep[p] = true
		}
	}
	var stale []string
	err := filepath.WalkDir(oldDir, func(path string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(oldDir, path)
		if err == nil && rel != "." && !keep[rel] {
			stale = append(stale, rel)
		}
		return err
	})
	if os.IsNotExist(err) {
		return nil, nil
	}
	return stale, err
}

// validatePayload checks every path and returns the payload with cleaned paths.
func validatePayload(payload map[string]fileProjection) (map[string]fileProjection, error) {
	clean := make(map[string]fileProjection, len(payload))
	for name, f := range payload {
		if err := validatePath(name); err != nil {
			return nil, err
		}
		clean[filepath.Clean(name)] = f
	}
	return clean, nil
}

// validatePath: a payload path is relative, has no ".." element, does not start with "..", and fits
// the file system's limits.
func validatePath(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("invalid path: must not be empty: %q", p)
	case filepath.IsAbs(p):
		return fmt.Errorf("invalid path: must be relative path: %s", p)
	case len(p) > maxPathLen:
		return fmt.Errorf("invalid path: must be less than or equal to %d characters", maxPathLen)
	}
	items := strings.Split(p, string(os.PathSeparator))
	for _, item := range items {
		if item == ".." {
			return fmt.Errorf("invalid path: must not contain '..': %s", p)
		}
		if len(item) > maxFileNameLen {
			return fmt.Errorf("invalid path: filenames must be less than or equal to %d characters", maxFileNameLen)
		}
	}
	if strings.HasPrefix(items[0], "..") && len(items[0]) > 2 {
		return fmt.Errorf("invalid path: must not start with '..': %s", p)
	}
	return nil
}
