package server

import (
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/nodelet/nodelet/internal/periodic"
	"github.com/nodelet/nodelet/podrules"
)

// Rotated files are named <log>.<timestamp>, older ones compressed to <log>.<timestamp>.gz, as the kubelet
// names them.
const (
	rotatedTimeFormat = "20060102-150405"
	gzSuffix          = ".gz"
	tmpSuffix         = ".tmp"
)

// rotationPolicy is containerLogMaxSize and containerLogMaxFiles; maxSize <= 0 disables rotation.
type rotationPolicy struct {
	maxSize  int64
	maxFiles int
}

func parseRotationPolicy(size string, files int32) (rotationPolicy, error) {
	if size == "" {
		return rotationPolicy{}, nil
	}
	q, err := resource.ParseQuantity(size)
	if err != nil {
		return rotationPolicy{}, fmt.Errorf("node server: containerLogMaxSize %q: %w", size, err)
	}
	n, ok := q.AsInt64()
	if !ok {
		return rotationPolicy{}, fmt.Errorf("node server: containerLogMaxSize %q is too large", size)
	}
	if n > 0 && files < 2 {
		return rotationPolicy{}, fmt.Errorf("node server: containerLogMaxFiles must be at least 2, got %d", files)
	}
	return rotationPolicy{maxSize: n, maxFiles: int(files)}, nil
}

// rotateLogs rotates every rotationPeriod, the first time one period after the start, until ctx ends.
func (s logRotation) rotateLogs(ctx context.Context) {
	if s.rotation.maxSize <= 0 {
		return
	}
	_ = periodic.Every(ctx, s.opts.Clock, rotationPeriod, periodic.Measured(ctx, "log-rotation", s.rotateOnce))
}

// rotateOnce rotates the log of each running container whose current file reached maxSize.
func (s logRotation) rotateOnce(ctx context.Context) {
	log := ctrl.LoggerFrom(ctx)
	cs, err := s.opts.Runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
	})
	if err != nil {
		log.Error(err, "Failed to list containers for log rotation")
		return
	}
	running := make(map[string]bool, len(cs))
	for _, c := range cs {
		running[c.GetId()] = true
		if err := s.rotateContainer(ctx, c.GetId()); err != nil {
			log.Error(err, "Failed to rotate container log", "containerID", c.GetId())
		}
	}
	for id := range s.logPaths {
		if !running[id] {
			delete(s.logPaths, id)
		}
	}
}

// logPath is the container's log path, asked of the runtime once per container.
func (s logRotation) logPath(ctx context.Context, id string) (string, error) {
	if path, ok := s.logPaths[id]; ok {
		return path, nil
	}
	resp, err := s.opts.Runtime.ContainerStatus(ctx, id, false)
	if err != nil {
		return "", err
	}
	path := resp.GetStatus().GetLogPath()
	s.logPaths[id] = path
	return path, nil
}

func (s logRotation) rotateContainer(ctx context.Context, id string) error {
	path, err := s.logPath(ctx, id)
	if err != nil || path == "" {
		return err
	}
	if !podrules.InsideDir(s.opts.PodLogsDir, path) {
		// Not a pod's log (a container made by another tool, or a label forged): never rename or remove it.
		ctrl.LoggerFrom(ctx).V(2).Info("Not rotating a log outside the pod logs directory", "containerID", id, "path", path)
		return nil
	}
	info, err := os.Stat(path)
	if os.IsNotExist(err) {
		// Lost (removed by hand, or a failed rotation): have the runtime create it again.
		return s.opts.Runtime.ReopenContainerLog(ctx, id)
	}
	if err != nil || info.Size() < s.rotation.maxSize {
		return err
	}
	if err := s.pruneRotated(path); err != nil {
		return err
	}
	return s.rotateLatest(ctx, id, path)
}

// pruneRotated makes room for one more rotated file: leftovers of interrupted compressions go, the oldest
// files go until maxFiles-2 rotated ones are left (with the one about to be rotated and the new current
// file that makes maxFiles), and the ones kept are compressed.
func (s logRotation) pruneRotated(path string) error {
	rotated, err := rotatedLogs(path)
	if err != nil {
		return err
	}
	keep := max(s.rotation.maxFiles-2, 0)
	for len(rotated) > keep {
		if err := os.Remove(rotated[0]); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("remove old log %q: %w", rotated[0], err)
		}
		rotated = rotated[1:]
	}
	for _, l := range rotated {
		if !strings.HasSuffix(l, gzSuffix) {
			if err := compressLog(l); err != nil {
				return err
			}
		}
	}
	return nil
}

// rotatedLogs lists path's rotated files, oldest first, removing what interrupted runs left: temporary
// files, and uncompressed files whose compressed copy exists.
func rotatedLogs(path string) ([]string, error) {
	all, err := filepath.Glob(path + ".*")
	if err != nil {
		return nil, err
	}
	present := make(map[string]bool, len(all))
	for _, l := range all {
		present[l] = true
	}
	var inUse []string
	for _, l := range all {
		if strings.HasSuffix(l, tmpSuffix) || present[l+gzSuffix] {
			_ = os.Remove(l)
			continue
		}
		inUse = append(inUse, l)
	}
	sort.Strings(inUse)
	return inUse, nil
}

// compressLog gzips l into l.gz (through a temporary file) and removes l.
func compressLog(l string) error {
	in, err := os.Open(l)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	tmp := l + tmpSuffix
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp) }()
	zw := gzip.NewWriter(out)
	_, err = io.Copy(zw, in)
	if cerr := zw.Close(); err == nil {
		err = cerr
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("compress log %q: %w", l, err)
	}
	if err := os.Rename(tmp, l+gzSuffix); err != nil {
		return err
	}
	return os.Remove(l)
}

// rotateLatest renames the current file to <path>.<timestamp> and has the runtime reopen (create) path; if
// the runtime fails, the file is renamed back to be rotated next time. Followers wait for it to finish.
func (s logRotation) rotateLatest(ctx context.Context, id, path string) error {
	rotated := path + "." + s.opts.Clock.Now().Format(rotatedTimeFormat)
	if _, err := os.Stat(rotated); err == nil {
		return nil // rotated within this second already: next round
	}
	s.rotating.Lock()
	defer s.rotating.Unlock()
	if err := os.Rename(path, rotated); err != nil {
		return fmt.Errorf("rotate log %q: %w", path, err)
	}
	if err := s.opts.Runtime.ReopenContainerLog(ctx, id); err != nil {
		if rerr := os.Rename(rotated, path); rerr != nil {
			ctrl.LoggerFrom(ctx).Error(rerr, "Failed to rename a rotated log back", "path", path)
		}
		return fmt.Errorf("reopen container log: %w", err)
	}
	return nil
}
