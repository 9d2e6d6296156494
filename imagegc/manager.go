package imagegc

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/nodelet/nodelet/internal/periodic"
)

// ImageGCPeriod is how often the Manager detects images and collects garbage: the kubelet's constant.
const ImageGCPeriod = 5 * time.Minute

// Event reasons, the kubelet's (pkg/kubelet/events).
const (
	ReasonFreeDiskSpaceFailed = "FreeDiskSpaceFailed"
	ReasonImageGCFailed       = "ImageGCFailed"
	ReasonInvalidDiskCapacity = "InvalidDiskCapacity"
)

// Runtime is what the Manager asks of the container runtime; *runtime.Client implements it.
type Runtime interface {
	ListImages(ctx context.Context, filter *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error)
	// ListContainers must list every container, exited ones included, for an empty filter.
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
	RemoveImage(ctx context.Context, image *runtimeapi.ImageSpec) error
	ImageFsInfo(ctx context.Context) (*runtimeapi.ImageFsInfoResponse, error)
}

// Recorder records the Manager's events; client-go's record.EventRecorder implements it.
type Recorder interface {
	Event(object apiruntime.Object, eventtype, reason, message string)
}

// Policy is the kubelet's ImageGCPolicy, from the KubeletConfiguration.
type Policy struct {
	// HighThresholdPercent is imageGCHighThresholdPercent: at or above this image filesystem usage,
	// garbage is collected.
	HighThresholdPercent int
	// LowThresholdPercent is imageGCLowThresholdPercent: the usage collection frees down to.
	LowThresholdPercent int
	// MinAge is imageMinimumGCAge: an image detected less than this long ago is not removed for space.
	MinAge time.Duration
	// MaxAge is imageMaximumGCAge (0: off): an image unused for longer is removed whatever the usage.
	MaxAge time.Duration
}

// Options are what New needs. Runtime is required.
type Options struct {
	Runtime Runtime
	// Filesystem reads the image filesystem's capacity (default: statfs(2)).
	Filesystem Filesystem
	// Clock is the clock of detection, ages and the period (default: the real clock).
	Clock clock.WithTicker
	// Recorder records the events on the Node named NodeName (nil: none).
	Recorder Recorder
	NodeName string
	// Metrics registers kubelet_image_garbage_collected_total (nil: the metric is kept, unregistered).
	Metrics prometheus.Registerer
	Policy  Policy
	// SandboxImage, when set, is never removed (matched by image ID, tag or digest), as if it were
	// pinned. The kubelet v1.37 has no such setting — the runtime pins its sandbox image — so nodelet
	// leaves it empty; it is for embedders whose runtime does not pin.
	SandboxImage string
	// Ready, when set, delays Start's first pass until it is closed (the runtime has answered).
	Ready <-chan struct{}
}

// Manager is the image garbage collector. Start runs it; GarbageCollect and DeleteUnusedImages are one
// pass each. Its methods are safe for concurrent use.
type Manager struct {
	runtime  Runtime
	fs       Filesystem
	clock    clock.WithTicker
	recorder Recorder
	nodeRef  *corev1.ObjectReference
	policy   Policy
	sandbox  string
	ready    <-chan struct{}
	metrics  *metrics

	gcMu sync.Mutex // one pass at a time

	mu      sync.Mutex
	records map[string]*imageRecord

	// passDone, when set (tests), is called after each pass of Start.
	passDone func()
}

// imageRecord is what the Manager knows of one image, by image ID.
type imageRecord struct {
	firstDetected  time.Time
	lastUsed       time.Time
	size           int64
	pinned         bool
	sandbox        bool
	runtimeHandler string
}

// New validates the policy as the kubelet's NewImageGCManager does and returns a Manager.
func New(opts Options) (*Manager, error) {
	p := opts.Policy
	if p.HighThresholdPercent < 0 || p.HighThresholdPercent > 100 {
		return nil, fmt.Errorf("invalid HighThresholdPercent %d, must be in range [0-100]", p.HighThresholdPercent)
	}
	if p.LowThresholdPercent < 0 || p.LowThresholdPercent > 100 {
		return nil, fmt.Errorf("invalid LowThresholdPercent %d, must be in range [0-100]", p.LowThresholdPercent)
	}
	if p.LowThresholdPercent > p.HighThresholdPercent {
		return nil, fmt.Errorf("LowThresholdPercent %d can not be higher than HighThresholdPercent %d", p.LowThresholdPercent, p.HighThresholdPercent)
	}
	if opts.Runtime == nil {
		return nil, errors.New("imagegc: Options.Runtime is required")
	}
	m := &Manager{
		runtime: opts.Runtime, fs: opts.Filesystem, clock: opts.Clock, recorder: opts.Recorder, policy: p,
		sandbox: opts.SandboxImage, ready: opts.Ready, metrics: newMetrics(opts.Metrics),
		nodeRef: &corev1.ObjectReference{Kind: "Node", Name: opts.NodeName, UID: types.UID(opts.NodeName)},
		records: map[string]*imageRecord{},
	}
	if m.fs == nil {
		m.fs = Statfs{}
	}
	if m.clock == nil {
		m.clock = clock.RealClock{}
	}
	return m, nil
}

// Enabled reports whether Start collects garbage: not with imageGCHighThresholdPercent 100 and
// imageMaximumGCAge 0, as in the kubelet.
func (m *Manager) Enabled() bool {
	return m.policy.HighThresholdPercent != 100 || m.policy.MaxAge != 0
}

// Start detects images and collects garbage at once and then every ImageGCPeriod until ctx ends; it
// never fails (a failed pass is logged, and an event is recorded when it fails again). It is a
// controller-runtime Runnable; the logger comes from ctx.
func (m *Manager) Start(ctx context.Context) error {
	log := logr.FromContextOrDiscard(ctx)
	if !m.Enabled() {
		log.V(2).Info("ImageGCHighThresholdPercent is set 100 and ImageMaximumGCAge is 0, Disable image GC")
		return nil
	}
	beganGC := m.clock.Now()
	prevFailed := false
	return periodic.Run(ctx, m.clock, m.ready, ImageGCPeriod, periodic.Measured(ctx, "image-gc", func(ctx context.Context) {
		prevFailed = m.pass(ctx, beganGC, prevFailed)
		if m.passDone != nil {
			m.passDone()
		}
	}))
}

// pass is one period: the kubelet's image detection, then its garbage collection with the kubelet's
// failure handling (an event only for a repeated failure). It returns whether the collection failed.
func (m *Manager) pass(ctx context.Context, beganGC time.Time, prevFailed bool) bool {
	log := logr.FromContextOrDiscard(ctx)
	if _, err := m.detectImages(ctx, m.clock.Now()); err != nil {
		log.Info("Failed to monitor images", "err", err)
	}
	err := m.GarbageCollect(ctx, beganGC)
	switch {
	case err != nil && prevFailed:
		log.Error(err, "Image garbage collection failed multiple times in a row")
		m.event(corev1.EventTypeWarning, ReasonImageGCFailed, err.Error())
		return true
	case err != nil:
		log.Error(err, "Image garbage collection failed once. Stats initialization may not have completed yet")
		return true
	case prevFailed:
		log.V(1).Info("Image garbage collection succeeded")
	default:
		log.V(4).Info("Image garbage collection succeeded")
	}
	return false
}

func (m *Manager) event(eventtype, reason, message string) {
	if m.recorder != nil {
		m.recorder.Event(m.nodeRef, eventtype, reason, message)
	}
}
