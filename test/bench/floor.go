package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/uuid"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime"
)

const (
	// floorLabel marks the floor's sandboxes. They carry none of the io.kubernetes.pod.* labels, so that
	// no node agent takes them for its own.
	floorLabel     = "nodelet.io/bench"
	floorLabelVal  = "floor"
	floorNamespace = "bench-floor"
	// floorPodLimit bounds one floor pod's start (three RPCs), floorCleanupLimit the removal of all.
	floorPodLimit     = 2 * time.Minute
	floorCleanupLimit = 3 * time.Minute
	pullLimit         = 5 * time.Minute
)

// floor starts pods straight through CRI and remembers every sandbox it must remove.
type floor struct {
	cfg      config
	cri      *runtime.Client
	imageRef string

	mu        sync.Mutex
	sandboxes map[string]string // sandbox ID → its log directory
}

// runFloor measures the CRI floor with nodelet stopped (it would remove sandboxes it does not know).
func runFloor(ctx context.Context, cfg config, r *report) (err error) {
	logf("floor: stopping nodelet")
	if err := bed(ctx, cfg, "", 90*time.Second, "stop", "nodelet"); err != nil {
		return err
	}
	cri, err := runtime.Dial(cfg.criEndpoint, runtime.Options{Timeout: floorPodLimit})
	if err != nil {
		return err
	}
	defer func() { _ = cri.Close() }()
	f := &floor{cfg: cfg, cri: cri, sandboxes: map[string]string{}}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), floorCleanupLimit)
		defer cancel()
		if cerr := f.cleanup(cctx); cerr != nil {
			err = errors.Join(err, fmt.Errorf("cleanup: %w", cerr))
		}
	}()
	if err := f.cleanup(ctx); err != nil { // leftovers of an interrupted run
		return fmt.Errorf("removing leftover floor sandboxes: %w", err)
	}
	if err := f.pullImages(ctx); err != nil {
		return err
	}
	if err := f.single(ctx, r); err != nil {
		return err
	}
	return f.burst(ctx, r)
}

// pullImages makes sure the image and the pause image are present and keeps the image's ID.
func (f *floor) pullImages(ctx context.Context) error {
	for _, image := range []string{f.cfg.image, pauseImage} {
		ref, err := f.ensureImage(ctx, image)
		if err != nil {
			return err
		}
		if image == f.cfg.image {
			f.imageRef = ref
		}
	}
	return nil
}

func (f *floor) ensureImage(ctx context.Context, image string) (string, error) {
	spec := &runtimeapi.ImageSpec{Image: image}
	img, err := f.cri.ImageStatus(ctx, spec)
	if err != nil {
		return "", fmt.Errorf("image status of %s: %w", image, err)
	}
	if img != nil {
		return img.Id, nil
	}
	logf("floor: pulling %s", image)
	pctx, cancel := context.WithTimeout(ctx, pullLimit)
	defer cancel()
	ref, err := f.cri.PullImage(pctx, spec, nil, nil)
	if err != nil {
		return "", fmt.Errorf("pull %s: %w", image, err)
	}
	return ref, nil
}

// single starts one pod at a time, removing each (untimed) before the next.
func (f *floor) single(ctx context.Context, r *report) error {
	logf("floor: %d single pods", f.cfg.single)
	for i := range f.cfg.single {
		d, id, err := f.startPod(ctx, fmt.Sprintf("floor-single-%02d", i), time.Time{})
		if err != nil {
			return err
		}
		r.add(r.singleStart(), agentFloor, d)
		if err := f.removePod(ctx, id); err != nil {
			return err
		}
	}
	return nil
}

// burst starts all pods at once; each pod's latency runs from the common start.
func (f *floor) burst(ctx context.Context, r *report) error {
	names := make([]string, f.cfg.burst)
	for i := range names {
		names[i] = fmt.Sprintf("floor-burst-%02d", i)
	}
	logf("floor: burst of %d pods", len(names))
	lat, err := together(names, func(name string, t0 time.Time) (time.Duration, error) {
		d, _, err := f.startPod(ctx, name, t0)
		return d, err
	})
	r.add(r.burstStart(), agentFloor, lat...)
	return err
}

// startPod runs a sandbox and starts a busybox `sleep 3600` in it, and returns the time from t0 to
// StartContainer's answer (a zero t0: from just before RunPodSandbox). The sandbox ID is returned (and remembered for cleanup) even on failure.
func (f *floor) startPod(ctx context.Context, name string, t0 time.Time) (time.Duration, string, error) {
	ctx, cancel := context.WithTimeout(ctx, floorPodLimit)
	defer cancel()
	uid := string(uuid.NewUUID())
	sb := f.sandboxConfig(name, uid)
	if err := os.MkdirAll(sb.LogDirectory, 0o755); err != nil {
		return 0, "", err
	}
	if t0.IsZero() {
		t0 = time.Now()
	}
	id, err := f.cri.RunPodSandbox(ctx, sb, "")
	if err != nil {
		_ = os.RemoveAll(sb.LogDirectory)
		return 0, "", fmt.Errorf("floor pod %s: %w", name, err)
	}
	f.remember(id, sb.LogDirectory)
	cid, err := f.cri.CreateContainer(ctx, id, f.containerConfig(), sb)
	if err != nil {
		return 0, id, fmt.Errorf("floor pod %s: %w", name, err)
	}
	if err := f.cri.StartContainer(ctx, cid); err != nil {
		return 0, id, fmt.Errorf("floor pod %s: %w", name, err)
	}
	return time.Since(t0), id, nil
}

// sandboxConfig is like the kubelet's for a BestEffort pod, with the floor's label instead of the pod ones.
func (f *floor) sandboxConfig(name, uid string) *runtimeapi.PodSandboxConfig {
	return &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: name, Namespace: floorNamespace, Uid: uid},
		Hostname:     name,
		LogDirectory: filepath.Join(f.cfg.bedDir, "logs", "bench", uid),
		Labels:       map[string]string{floorLabel: floorLabelVal},
		DnsConfig: &runtimeapi.DNSConfig{
			Servers:  []string{"10.96.0.10"},
			Searches: []string{floorNamespace + ".svc.cluster.local", "svc.cluster.local", "cluster.local"},
			Options:  []string{"ndots:5"},
		},
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
				NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_POD,
					Pid: runtimeapi.NamespaceMode_CONTAINER, Ipc: runtimeapi.NamespaceMode_POD},
				Seccomp: &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault},
			},
		},
	}
}

func (f *floor) containerConfig() *runtimeapi.ContainerConfig {
	return &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "main"},
		Image:    &runtimeapi.ImageSpec{Image: f.imageRef, UserSpecifiedImage: f.cfg.image},
		Command:  []string{"sleep", "3600"},
		Labels:   map[string]string{floorLabel: floorLabelVal},
		LogPath:  "main/0.log",
		Linux:    &runtimeapi.LinuxContainerConfig{},
	}
}

func (f *floor) remember(id, logDir string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sandboxes[id] = logDir
}

// removePod stops and removes a sandbox (and its container) and its log directory.
func (f *floor) removePod(ctx context.Context, id string) error {
	if err := f.cri.StopPodSandbox(ctx, id); err != nil && !errors.Is(err, runtime.ErrNotFound) {
		return fmt.Errorf("stop floor sandbox %s: %w", id, err)
	}
	if err := f.cri.RemovePodSandbox(ctx, id); err != nil && !errors.Is(err, runtime.ErrNotFound) {
		return fmt.Errorf("remove floor sandbox %s: %w", id, err)
	}
	f.mu.Lock()
	logDir, ok := f.sandboxes[id]
	delete(f.sandboxes, id)
	f.mu.Unlock()
	if ok {
		_ = os.RemoveAll(logDir)
	}
	return nil
}

// cleanup removes every floor sandbox: the remembered ones and any the runtime lists with the floor label.
func (f *floor) cleanup(ctx context.Context) error {
	listed, err := f.cri.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{
		LabelSelector: map[string]string{floorLabel: floorLabelVal},
	})
	if err != nil {
		return err
	}
	ids := map[string]bool{}
	for _, s := range listed {
		ids[s.Id] = true
	}
	f.mu.Lock()
	for id := range f.sandboxes {
		ids[id] = true
	}
	f.mu.Unlock()
	var errs []error
	for id := range ids {
		errs = append(errs, f.removePod(ctx, id))
	}
	_ = os.Remove(filepath.Join(f.cfg.bedDir, "logs", "bench")) // only if empty
	return errors.Join(errs...)
}
