package containergc

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/podrules"
	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/runtime/podconfig"
)

const (
	// legacyLogSuffix ends the kubelet's legacy symlinks' names.
	legacyLogSuffix = ".log"
	// logDirDelimiter separates namespace, name and UID in a pod log directory's name.
	logDirDelimiter = "_"
)

// removeContainerLogs removes a container's log file with its rotated files (<log>.<timestamp>[.gz],
// <log>.tmp: the kubelet's log manager's Clean) and its legacy symlink. It fails — and the container is
// kept — when the runtime cannot tell the container's status (runtime.ErrNotFound: it is gone already)
// or a file cannot be removed.
func (c *Collector) removeContainerLogs(ctx context.Context, id string) error {
	resp, err := c.runtime.ContainerStatus(ctx, id, false)
	if err != nil {
		return fmt.Errorf("failed to get container status %q: %w", id, err)
	}
	st := resp.GetStatus()
	if st == nil {
		return fmt.Errorf("container status %q: no status", id)
	}
	if path, ok := c.logPath(ctx, st); ok {
		if err := removeLogFiles(path); err != nil {
			return fmt.Errorf("failed to remove container %q log %q: %w", id, path, err)
		}
	}
	return c.removeLegacySymlink(st)
}

// logPath is the container's log file as the runtime reports it, else where nodelet asks runtimes to write
// it (podconfig.PodLogDir and podconfig.ContainerLogPath from the container's labels and restart count
// annotation). ok is false when there is none to remove: identifiers unsafe as path segments, or a file
// outside the pod logs directory, which is never removed.
func (c *Collector) logPath(ctx context.Context, st *runtimeapi.ContainerStatus) (string, bool) {
	p := st.GetLogPath()
	if p == "" {
		l := st.GetLabels()
		pod := &corev1.Pod{}
		pod.Namespace, pod.Name, pod.UID = l[runtime.LabelPodNamespace], l[runtime.LabelPodName], runtime.PodUIDOf(l)
		restarts, err := strconv.Atoi(st.GetAnnotations()[runtime.AnnotationContainerRestartCount])
		if err != nil {
			restarts = int(st.GetMetadata().GetAttempt())
		}
		dir, err := podconfig.PodLogDir(c.podLogs, pod)
		if err != nil {
			return "", false
		}
		file, err := podconfig.ContainerLogPath(st.GetMetadata().GetName(), restarts)
		if err != nil {
			return "", false
		}
		p = filepath.Join(dir, file)
	}
	if !podrules.InsideDir(c.podLogs, p) {
		logr.FromContextOrDiscard(ctx).V(2).Info("Not removing a log outside the pod logs directory", "containerID", st.GetId(), "path", p)
		return "", false
	}
	return p, true
}

// removeLogFiles removes path and the files named path.<anything> next to it (rotated logs). A missing
// file or directory is no error.
func removeLogFiles(path string) error {
	dir, base := filepath.Split(path)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		name := e.Name()
		if name != base && !strings.HasPrefix(name, base+".") {
			continue
		}
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// legacySymlink is the kubelet's legacy log symlink of a container:
// <dir>/<pod name>_<namespace>_<container name>-<container ID>.log, the name cut to 255 bytes. ok is false
// without a directory or when an identifier is unsafe as a path segment.
func legacySymlink(dir string, st *runtimeapi.ContainerStatus) (string, bool) {
	if dir == "" {
		return "", false
	}
	l := st.GetLabels()
	podName, ns, name, id := l[runtime.LabelPodName], l[runtime.LabelPodNamespace], st.GetMetadata().GetName(), st.GetId()
	for _, seg := range []string{podName, ns, name, id} {
		if podrules.PathSegment("legacy log symlink", seg) != nil {
			return "", false
		}
	}
	file := podName + "_" + ns + "_" + name + "-" + id
	if maxLen := podrules.MaxPathSegment - len(legacyLogSuffix); len(file) > maxLen {
		file = file[:maxLen]
	}
	file += legacyLogSuffix
	if podrules.PathSegment("legacy log symlink", file) != nil {
		return "", false
	}
	return filepath.Join(dir, file), true
}

// removeLegacySymlink removes the container's legacy log symlink, if there is one; a file there that is not
// a symlink is left alone.
func (c *Collector) removeLegacySymlink(st *runtimeapi.ContainerStatus) error {
	link, ok := legacySymlink(c.legacyDir, st)
	if !ok {
		return nil
	}
	fi, err := os.Lstat(link)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("container %q log legacy symbolic link %q: %w", st.GetId(), link, err)
	case fi.Mode()&fs.ModeSymlink == 0:
		return nil
	}
	if err := os.Remove(link); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("failed to remove container %q log legacy symbolic link %q: %w", st.GetId(), link, err)
	}
	return nil
}

// evictLogs is the kubelet's evictPodLogsDirectories: once every source has been read, the log directories
// of gone pods that have no container left (withContainers; nil: unknown, none is removed); then the
// dangling legacy symlinks of containers that are not running.
func (c *Collector) evictLogs(ctx context.Context, withContainers map[types.UID]bool) error {
	var errs []error
	if withContainers != nil {
		if err := c.evictPodLogDirs(ctx, withContainers); err != nil {
			errs = append(errs, err)
		}
	}
	c.evictDanglingSymlinks(ctx)
	return errors.Join(errs...)
}

// evictPodLogDirs removes <podLogsDir>/<namespace>_<name>_<uid> of gone pods without containers. A
// missing pod logs directory has nothing to remove.
func (c *Collector) evictPodLogDirs(ctx context.Context, withContainers map[types.UID]bool) error {
	log := logr.FromContextOrDiscard(ctx)
	entries, err := os.ReadDir(c.podLogs)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("failed to read podLogsDirectory %q: %w", c.podLogs, err)
	}
	v := c.view(ctx) // after the listing: a directory a worker made meanwhile is its pod's, which v names
	if !v.ready {
		return nil
	}
	for _, e := range entries {
		uid, ok := podUIDOfLogDir(e)
		if !ok || v.state(uid) != podGone || withContainers[uid] {
			continue
		}
		if podrules.PathSegment("pod log directory", e.Name()) != nil {
			continue
		}
		log.V(4).Info("Removing pod logs", "podUID", uid)
		if err := os.RemoveAll(filepath.Join(c.podLogs, e.Name())); err != nil {
			log.Error(err, "Failed to remove pod logs directory", "path", e.Name())
		}
	}
	return nil
}

// podUIDOfLogDir is the pod UID of a pod log directory, <namespace>_<name>_<uid> (the kubelet's
// parsePodUIDFromLogsDirectory); ok is false for anything else.
func podUIDOfLogDir(e fs.DirEntry) (types.UID, bool) {
	parts := strings.Split(e.Name(), logDirDelimiter)
	if !e.IsDir() || len(parts) < 3 || parts[len(parts)-1] == "" {
		return "", false
	}
	return types.UID(parts[len(parts)-1]), true
}

// evictDanglingSymlinks removes the legacy symlinks whose log file is gone, unless their container still
// exists and has not exited (its log may be in the middle of a rotation), as the kubelet.
func (c *Collector) evictDanglingSymlinks(ctx context.Context) {
	if c.legacyDir == "" {
		return
	}
	log := logr.FromContextOrDiscard(ctx)
	entries, err := os.ReadDir(c.legacyDir)
	if err != nil {
		return
	}
	for _, e := range entries {
		name := e.Name()
		if e.Type()&fs.ModeSymlink == 0 || !strings.HasSuffix(name, legacyLogSuffix) {
			continue
		}
		link := filepath.Join(c.legacyDir, name)
		if _, err := os.Stat(link); !errors.Is(err, fs.ErrNotExist) {
			continue // the log is there (or cannot be told)
		}
		if id, ok := containerIDOfSymlink(name); ok && c.mayBeRotating(ctx, id) {
			continue
		}
		if err := os.Remove(link); err != nil && !errors.Is(err, fs.ErrNotExist) {
			log.Error(err, "Failed to remove container log dead symlink", "path", link)
		}
	}
}

// containerIDOfSymlink is the container ID at the end of a legacy symlink's name (at least 6 characters,
// as the kubelet's getContainerIDFromLegacyLogSymlink).
func containerIDOfSymlink(name string) (string, bool) {
	i := strings.LastIndexByte(name, '-')
	if i < 0 {
		return "", false
	}
	id := strings.TrimSuffix(name[i+1:], legacyLogSuffix)
	return id, len(id) >= 6
}

// mayBeRotating reports whether the container exists and has not exited: its log file may be missing
// only for the moment of a rotation. A container whose status cannot be read does not hold its symlink.
func (c *Collector) mayBeRotating(ctx context.Context, id string) bool {
	resp, err := c.runtime.ContainerStatus(ctx, id, false)
	return err == nil && resp.GetStatus().GetState() != runtimeapi.ContainerState_CONTAINER_EXITED
}
