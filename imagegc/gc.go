package imagegc

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/sets"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Metric reasons of kubelet_image_garbage_collected_total, the kubelet's.
const (
	ReasonAge   = "age"
	ReasonSpace = "space"
)

// errInvalidCapacity is the kubelet's error for an image filesystem of capacity 0.
var errInvalidCapacity = errors.New("invalid capacity 0 on image filesystem")

// evictionInfo is one unused image, a candidate for removal.
type evictionInfo struct {
	id string
	imageRecord
}

// detectImages records the runtime's images as of detectTime: a new image is first detected then, an
// image used by any container (running or exited) was last used now; records of images gone are dropped.
// It returns the IDs of the images in use.
func (m *Manager) detectImages(ctx context.Context, detectTime time.Time) (sets.Set[string], error) {
	log := logr.FromContextOrDiscard(ctx)
	inUse := sets.New[string]()
	images, err := m.runtime.ListImages(ctx, &runtimeapi.ImageFilter{})
	if err != nil {
		return inUse, err
	}
	containers, err := m.runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{})
	if err != nil {
		return inUse, err
	}
	for _, c := range containers {
		// The kubelet's toKubeContainer: image_id, which runtimes report since CRI v1.30, else image_ref.
		id := c.GetImageId()
		if id == "" {
			id = c.GetImageRef()
		}
		log.V(5).Info("Container uses image", "containerName", c.GetMetadata().GetName(), "containerImage", c.GetImage().GetImage(), "imageID", id)
		inUse.Insert(id)
	}
	now := m.clock.Now()
	current := sets.New[string]()
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, img := range images {
		id := img.GetId()
		current.Insert(id)
		rec, ok := m.records[id]
		if !ok {
			log.V(5).Info("Image ID is new", "imageID", id, "runtimeHandler", img.GetSpec().GetRuntimeHandler())
			rec = &imageRecord{firstDetected: detectTime, runtimeHandler: img.GetSpec().GetRuntimeHandler()}
			m.records[id] = rec
		}
		if inUse.Has(id) {
			log.V(5).Info("Setting Image ID lastUsed", "imageID", id, "lastUsed", now)
			rec.lastUsed = now
		}
		rec.size = int64(min(img.GetSize(), math.MaxInt64)) //nolint:gosec // bounded above
		rec.pinned = img.GetPinned()
		rec.sandbox = m.isSandboxImage(img)
	}
	for id := range m.records {
		if !current.Has(id) {
			log.V(5).Info("Image ID is no longer present; removing from imageRecords", "imageID", id)
			delete(m.records, id)
		}
	}
	return inUse, nil
}

// isSandboxImage reports whether img is the Manager's SandboxImage, by ID, tag or digest.
func (m *Manager) isSandboxImage(img *runtimeapi.Image) bool {
	if m.sandbox == "" {
		return false
	}
	return img.GetId() == m.sandbox || slices.Contains(img.GetRepoTags(), m.sandbox) ||
		slices.Contains(img.GetRepoDigests(), m.sandbox)
}

// imagesInEvictionOrder detects the images and returns the unused, unpinned ones, least recently used
// first and, among those used (or never used) at the same time, first detected first.
func (m *Manager) imagesInEvictionOrder(ctx context.Context, freeTime time.Time) ([]evictionInfo, error) {
	log := logr.FromContextOrDiscard(ctx)
	inUse, err := m.detectImages(ctx, freeTime)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	images := make([]evictionInfo, 0, len(m.records))
	for id, rec := range m.records {
		switch {
		case inUse.Has(id):
			log.V(5).Info("Image ID is being used", "imageID", id)
		case rec.pinned:
			log.V(5).Info("Image is pinned, skipping garbage collection", "imageID", id)
		case rec.sandbox:
			log.V(5).Info("Image is the sandbox image, skipping garbage collection", "imageID", id)
		default:
			images = append(images, evictionInfo{id: id, imageRecord: *rec})
		}
	}
	slices.SortFunc(images, func(a, b evictionInfo) int {
		if c := a.lastUsed.Compare(b.lastUsed); c != 0 {
			return c
		}
		if c := a.firstDetected.Compare(b.firstDetected); c != 0 {
			return c
		}
		return cmp.Compare(a.id, b.id) // map order must not decide
	})
	return images, nil
}

// GarbageCollect is one collection, as the kubelet's: the images unused for longer than the maximum
// age (once the Manager has run that long since beganGC), then, when the image filesystem's usage is at
// or above the high threshold, enough unused images to bring it down to the low threshold. Not finding
// enough to free records FreeDiskSpaceFailed and is an error.
func (m *Manager) GarbageCollect(ctx context.Context, beganGC time.Time) error {
	m.gcMu.Lock()
	defer m.gcMu.Unlock()
	log := logr.FromContextOrDiscard(ctx)
	freeTime := m.clock.Now()
	images, err := m.imagesInEvictionOrder(ctx, freeTime)
	if err != nil {
		return err
	}
	if images, err = m.freeOldImages(ctx, images, freeTime, beganGC); err != nil {
		return err
	}
	capacity, available, err := m.imageFsStats(ctx)
	if err != nil {
		return err
	}
	if available > capacity {
		log.Info("Availability is larger than capacity", "available", available, "capacity", capacity)
		available = capacity
	}
	if capacity == 0 {
		m.event(corev1.EventTypeWarning, ReasonInvalidDiskCapacity, errInvalidCapacity.Error())
		return errInvalidCapacity
	}
	usagePercent := 100 - int(available*100/capacity)
	if usagePercent < m.policy.HighThresholdPercent {
		return nil
	}
	amountToFree := capacity*int64(100-m.policy.LowThresholdPercent)/100 - available
	log.Info("Disk usage on image filesystem is over the high threshold, trying to free bytes down to the low threshold",
		"usage", usagePercent, "highThreshold", m.policy.HighThresholdPercent, "amountToFree", amountToFree,
		"lowThreshold", m.policy.LowThresholdPercent)
	freed, err := m.freeSpace(ctx, amountToFree, freeTime, images)
	if err != nil {
		return err // e.g. a read-only filesystem: no event, the kubelet's ImageGCFailed covers it
	}
	if freed < amountToFree {
		// Usually the disk is full of something else than images: logs, volumes, other files.
		msg := fmt.Sprintf("Insufficient free disk space on the node's image filesystem (%d%% of %s used). "+
			"Failed to free sufficient space by deleting unused images (freed %d bytes). "+
			"Investigate disk usage, as it could be used by active images, logs, volumes, or other data.",
			usagePercent, formatSize(capacity), freed)
		m.event(corev1.EventTypeWarning, ReasonFreeDiskSpaceFailed, msg)
		return errors.New(msg)
	}
	return nil
}

// DeleteUnusedImages removes every unused image past the minimum age: the eviction manager's
// reclaim of image filesystem space.
func (m *Manager) DeleteUnusedImages(ctx context.Context) error {
	m.gcMu.Lock()
	defer m.gcMu.Unlock()
	logr.FromContextOrDiscard(ctx).Info("Attempting to delete unused images")
	freeTime := m.clock.Now()
	images, err := m.imagesInEvictionOrder(ctx, freeTime)
	if err != nil {
		return err
	}
	_, err = m.freeSpace(ctx, math.MaxInt64, freeTime, images)
	return err
}

// freeOldImages removes the images unused for longer than MaxAge, once MaxAge has passed since
// beganGC (so that images are not judged by the records of a Manager that just started), and returns
// the others.
func (m *Manager) freeOldImages(ctx context.Context, images []evictionInfo, freeTime, beganGC time.Time) ([]evictionInfo, error) {
	if m.policy.MaxAge == 0 || freeTime.Sub(beganGC) <= m.policy.MaxAge {
		return images, nil
	}
	log := logr.FromContextOrDiscard(ctx)
	var errs []error
	remaining := make([]evictionInfo, 0, len(images))
	for _, img := range images {
		log.V(5).Info("Evaluating image ID for possible garbage collection based on image age", "imageID", img.id)
		if freeTime.Sub(img.lastUsed) > m.policy.MaxAge {
			if err := m.freeImage(ctx, img, ReasonAge); err != nil {
				errs = append(errs, err)
				remaining = append(remaining, img)
			}
			continue
		}
		remaining = append(remaining, img)
	}
	if len(errs) > 0 {
		return remaining, fmt.Errorf("wanted to free images older than %v, encountered errors in image deletion: %w",
			m.policy.MaxAge, utilerrors.NewAggregate(errs))
	}
	return remaining, nil
}

// freeSpace removes images in order until bytesToFree are freed, skipping those used at or after
// freeTime and those younger than MinAge; it continues past removal errors and returns what it freed.
func (m *Manager) freeSpace(ctx context.Context, bytesToFree int64, freeTime time.Time, images []evictionInfo) (int64, error) {
	log := logr.FromContextOrDiscard(ctx)
	var errs []error
	var freed int64
	for _, img := range images {
		log.V(5).Info("Evaluating image ID for possible garbage collection based on disk usage", "imageID", img.id,
			"runtimeHandler", img.runtimeHandler)
		if !img.lastUsed.Before(freeTime) {
			log.V(5).Info("Image ID was used too recently, not eligible for garbage collection", "imageID", img.id,
				"lastUsed", img.lastUsed, "freeTime", freeTime)
			continue
		}
		if age := freeTime.Sub(img.firstDetected); age < m.policy.MinAge {
			log.V(5).Info("Image ID's age is less than the policy's minAge, not eligible for garbage collection", "imageID", img.id,
				"age", age, "minAge", m.policy.MinAge)
			continue
		}
		if err := m.freeImage(ctx, img, ReasonSpace); err != nil {
			errs = append(errs, err)
			continue
		}
		freed += img.size
		if freed >= bytesToFree {
			break
		}
	}
	if len(errs) > 0 {
		return freed, fmt.Errorf("wanted to free %d bytes, but freed %d bytes space with errors in image deletion: %w",
			bytesToFree, freed, utilerrors.NewAggregate(errs))
	}
	return freed, nil
}

// freeImage removes one image, forgets it and counts it under reason.
func (m *Manager) freeImage(ctx context.Context, img evictionInfo, reason string) error {
	logr.FromContextOrDiscard(ctx).Info("Removing image to free bytes", "imageID", img.id, "size", img.size,
		"runtimeHandler", img.runtimeHandler)
	if err := m.runtime.RemoveImage(ctx, &runtimeapi.ImageSpec{Image: img.id, RuntimeHandler: img.runtimeHandler}); err != nil {
		return err
	}
	m.mu.Lock()
	delete(m.records, img.id)
	m.mu.Unlock()
	m.metrics.collected.WithLabelValues(reason).Inc()
	return nil
}
