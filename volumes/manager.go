package volumes

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/nodelet/nodelet/podrules"
	"github.com/nodelet/nodelet/runtime/podconfig"
)

// Objects fetches what pods reference, by name only (a node may not list Secrets/ConfigMaps), and
// requests tokens.
type Objects interface {
	GetConfigMap(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error)
	GetSecret(ctx context.Context, namespace, name string) (*corev1.Secret, error)
	// CreateToken is the TokenRequest API for a pod's service account, bound to the pod.
	CreateToken(ctx context.Context, namespace, serviceAccount string, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error)
	// GetPersistentVolumeClaim and GetPersistentVolume read a pod's claim and the volume bound to it,
	// fresh on every call (a claim is waited for until it is bound).
	GetPersistentVolumeClaim(ctx context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error)
	GetPersistentVolume(ctx context.Context, name string) (*corev1.PersistentVolume, error)
}

// Mounter does the mount syscalls. The zero Manager uses the real one (Linux, root).
type Mounter interface {
	MountTmpfs(target string, sizeBytes int64) error
	BindMount(source, target string, readOnly bool) error
	Unmount(target string) error
	IsMountPoint(path string) (bool, error)
	// FormatAndMount mounts a block device at target with fsType, making that filesystem on it first if
	// it has none.
	FormatAndMount(device, target, fsType string, options []string) error
	// AttachFileDevice makes a loop device over the file or device at path, or finds the one already there
	// (the kubelet's hold on a mapped block volume); DetachFileDevice detaches it, none there is no error.
	AttachFileDevice(path string) error
	DetachFileDevice(path string) error
}

// ErrUnsupportedVolume is wrapped by the error of a volume type nodelet does not implement (nfs,
// iscsi, ...).
var ErrUnsupportedVolume = errors.New("unsupported volume type")

// VolumeError is the failure to set up one volume of a pod. Its message is the kubelet's FailedMount
// event message.
type VolumeError struct {
	Volume string
	Err    error
}

// Error is the kubelet's message: MountVolume.SetUp failed for volume "<name>" : <cause>, or the message of
// the operation that failed before SetUp (MountVolume.MountDevice, MapVolume.SetUpDevice).
func (e *VolumeError) Error() string {
	if op, ok := errors.AsType[*opError](e.Err); ok {
		return op.Error()
	}
	return fmt.Sprintf("MountVolume.SetUp failed for volume %q : %v", e.Volume, e.Err)
}

// opError is a failed volume operation other than SetUp, in the kubelet's words:
// "<operation> failed for volume "<name>" : <cause>".
type opError struct {
	op, volume string
	err        error
}

func (e *opError) Error() string {
	return fmt.Sprintf("%s failed for volume %q : %v", e.op, e.volume, e.err)
}

func (e *opError) Unwrap() error { return e.err }

// Unwrap returns the cause.
func (e *VolumeError) Unwrap() error { return e.Err }

// volumeError is the error of one volume's set-up: a *ClaimError as it is, anything else a *VolumeError.
func volumeError(name string, err error) error {
	if ce, ok := errors.AsType[*ClaimError](err); ok {
		return ce
	}
	if ve, ok := errors.AsType[*VolumeError](err); ok {
		return ve // named already (a claim's volume by its PersistentVolume, as the kubelet names it)
	}
	return &VolumeError{Volume: name, Err: err}
}

// Manager sets up and tears down the volumes of the pods bound to this node. It is safe for concurrent
// use; the calls for one pod are serialized.
type Manager struct {
	// RootDir is the agent's root dir: volumes live in <RootDir>/pods/<uid>/volumes/kubernetes.io~<plugin>/<name>.
	RootDir string
	Objects Objects
	Clock   clock.Clock
	// NodeName is this node: tokens are requested only for pods bound to it ("" skips the check).
	NodeName string
	// Mounter does the mount syscalls (tmpfs, bind, unmount); nil is the real one.
	Mounter Mounter
	// NodeAllocatable returns what pods may use: the default of a resourceFieldRef on a container
	// without that limit, and the upper bound of a tmpfs. nil: none known.
	NodeAllocatable func() corev1.ResourceList
	// RecursiveReadOnlyMounts says whether the runtime handler supports recursive read-only mounts.
	RecursiveReadOnlyMounts bool
	// CSI is the CSI drivers registered on this node; nil: none ever is.
	CSI CSIDrivers
	// RefreshCSIDriver asks a registered driver's NodeGetInfo again and has its CSINode entry rewritten
	// (volumes/csi.AllocatableUpdater.Refresh), when an attach failed at its attachment limit; nil: not asked.
	RefreshCSIDriver func(ctx context.Context, driver string)
	// CSIObjects reads CSIDrivers and VolumeAttachments; nil: no API server (drivers get the defaults
	// and nothing attachable is mounted).
	CSIObjects CSIObjects
	// AttachedVolumes reads the node's status.volumesAttached; nil: not checked (the VolumeAttachment
	// still is).
	AttachedVolumes func(ctx context.Context) ([]corev1.AttachedVolume, error)
	// ClaimStatus patches claims' status (node expansion); nil: volumes are not expanded on this node.
	ClaimStatus ClaimStatusWriter
	// PodCertificates issues the credentials of podCertificate projections; nil: such a projection fails
	// its volume.
	PodCertificates PodCertificates
	// Recorder records the volume events of pods and claims (FileSystemResizeSuccessful); nil: none.
	Recorder record.EventRecorder
	// InUseChanged, if set, is called when the set of volumes to report in use changes: the node's
	// status should then be written soon, since attachable volumes are mounted only once reported.
	InUseChanged func()

	mu   sync.Mutex
	pods map[types.UID]*podVolumes
	// statsCache holds the pods' last measured volume usage (Stats).
	statsCache volumeStatsCache
	// inUse is the attachable volumes of the pods, reported in the node's volumesInUse.
	inUse inUseSet
	// staged is the staging paths staged by this process (NodeStageVolume is called once per path).
	staged pathSet
	// stagingLocks serializes, per staging path, staging and publishing against unstaging.
	stagingLocks keyedMutex
	// metrics are the volume manager's metrics (RegisterMetrics); nil: none recorded.
	metrics *volumeMetrics
}

// podVolumes is what the manager remembers of one pod.
type podVolumes struct {
	mu   sync.Mutex // serializes SetUp, Mounts and TearDown of the pod
	done map[string]bool
	// waitingSince is when SetUp first left the pod's volumes not ready (zero: ready, or not yet set up).
	waitingSince time.Time
	tokens       map[string]*authenticationv1.TokenRequest
	// claims are the pod's persistentVolumeClaim volumes resolved and set up, by pod volume name.
	claims map[string]*claimedVolume
	// claimsSeen is a copy of claims as the last SetUp left them, for readers that must not wait for a
	// SetUp in progress (stats).
	claimsSeen atomic.Pointer[map[string]*claimedVolume]
	ready      atomic.Bool
	// volumes are the pod's volumes that containers use as the last SetUp left them (volume_manager_total_volumes).
	volumes atomic.Pointer[[]podVolumeState]
	// limited: the pod's local storage has a limit (its volumes are measured more often).
	limited atomic.Bool
}

// SetUp makes every volume of the pod that a container uses (in volumeMounts or volumeDevices) ready and
// current; a volume no container uses is left alone, as the kubelet leaves it. It is idempotent and meant to be called on
// every sync of the pod: contents are re-written only when they changed, tokens refreshed when due.
// It returns one error per volume that failed, having still set up the others: a *ClaimError for a
// claim that cannot be used yet, a *VolumeError for any other failure; and an *AttachLimitExceededError
// when the pod is to be rejected because a volume cannot be attached at the node's attachment limit.
func (m *Manager) SetUp(ctx context.Context, pod *corev1.Pod) []error {
	pv := m.state(pod.UID, true)
	pv.mu.Lock()
	defer pv.mu.Unlock()
	pv.limited.Store(podrules.HasLocalStorageLimit(pod))
	var errs []error
	states := make([]podVolumeState, 0, len(pod.Spec.Volumes))
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		if mounted, devices := volumeUses(pod, vol.Name); !mounted && !devices {
			pv.done[vol.Name] = true // no container uses it: the kubelet neither mounts nor maps it
			continue
		}
		wasDone, start := pv.done[vol.Name], m.clock().Now()
		err := m.setUpVolume(ctx, pod, vol, pv)
		plugin := volumePluginName(vol, pv.claims[vol.Name])
		switch {
		case errors.Is(err, errWaiting):
			logr.FromContextOrDiscard(ctx).V(2).Info("Volume waits", "volume", vol.Name, "reason", err.Error())
		case err != nil:
			errs = append(errs, volumeError(vol.Name, err))
		default:
			pv.done[vol.Name] = true
		}
		if !errors.Is(err, errWaiting) && (!wasDone || remountedEachSync(plugin)) {
			m.observeOp(plugin, opVolumeMount, start, err)
		}
		if plugin != "" {
			states = append(states, podVolumeState{plugin: plugin, mounted: pv.done[vol.Name]})
		}
	}
	pv.volumes.Store(&states)
	ready := allDone(pod.Spec.Volumes, pv.done)
	pv.ready.Store(ready)
	if err := m.csiv().checkAttachLimit(ctx, pod, pv, ready); err != nil {
		errs = append(errs, err)
	}
	seen := maps.Clone(pv.claims)
	pv.claimsSeen.Store(&seen)
	return errs
}

// claimsSnapshot is the pod's claimed volumes as the last SetUp left them.
func (pv *podVolumes) claimsSnapshot() map[string]*claimedVolume {
	if p := pv.claimsSeen.Load(); p != nil {
		return *p
	}
	return nil
}

// Ready reports whether every volume of the pod was set up at least once (containers start only then).
func (m *Manager) Ready(uid types.UID) bool {
	pv := m.state(uid, false)
	return pv != nil && pv.ready.Load()
}

func (m *Manager) setUpVolume(ctx context.Context, pod *corev1.Pod, vol *corev1.Volume, pv *podVolumes) error {
	switch src := &vol.VolumeSource; {
	case src.EmptyDir != nil:
		return m.srcv().setUpEmptyDir(pod, vol.Name, src.EmptyDir)
	case src.HostPath != nil:
		return checkHostPath(src.HostPath)
	case src.ConfigMap != nil:
		return m.srcv().setUpConfigMap(ctx, pod, vol.Name, src.ConfigMap)
	case src.Secret != nil:
		return m.srcv().setUpSecret(ctx, pod, vol.Name, src.Secret)
	case src.DownwardAPI != nil:
		return m.srcv().setUpDownwardAPI(pod, vol.Name, src.DownwardAPI)
	case src.Projected != nil:
		return m.srcv().setUpProjected(ctx, pod, vol.Name, src.Projected, pv)
	case src.PersistentVolumeClaim != nil, src.Ephemeral != nil:
		return m.claimv().setUpClaim(ctx, pod, vol, pv)
	case src.CSI != nil:
		return m.csiv().setUpCSI(ctx, pod, csiFromInline(pod, vol), pv)
	case src.Image != nil:
		return nil // the runtime mounts the image; the pod's sync pulls it
	case isEmptySource(src):
		return m.srcv().setUpEmptyDir(pod, vol.Name, &corev1.EmptyDirVolumeSource{})
	default:
		return fmt.Errorf("%w %q", ErrUnsupportedVolume, sourceKind(src))
	}
}

func allDone(vols []corev1.Volume, done map[string]bool) bool {
	for _, v := range vols {
		if !done[v.Name] {
			return false
		}
	}
	return true
}

// state returns the pod's record, creating it when asked.
func (m *Manager) state(uid types.UID, create bool) *podVolumes {
	m.mu.Lock()
	defer m.mu.Unlock()
	pv := m.pods[uid]
	if pv == nil && create {
		if m.pods == nil {
			m.pods = map[types.UID]*podVolumes{}
		}
		pv = &podVolumes{done: map[string]bool{}, tokens: map[string]*authenticationv1.TokenRequest{},
			claims: map[string]*claimedVolume{}}
		m.pods[uid] = pv
	}
	return pv
}

func (m *Manager) forget(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.pods, uid)
}

func (m *Manager) clock() clock.Clock {
	if m.Clock == nil {
		return clock.RealClock{}
	}
	return m.Clock
}

func (m *Manager) mounter() Mounter {
	if m.Mounter == nil {
		return realMounter{}
	}
	return m.Mounter
}

func (m *Manager) allocatable() corev1.ResourceList {
	if m.NodeAllocatable == nil {
		return nil
	}
	return m.NodeAllocatable()
}

// Plugin directory names under <pod>/volumes, as the kubelet escapes them.
const (
	pluginEmptyDir    = "kubernetes.io~empty-dir"
	pluginConfigMap   = "kubernetes.io~configmap"
	pluginSecret      = "kubernetes.io~secret"
	pluginDownwardAPI = "kubernetes.io~downward-api"
	pluginProjected   = "kubernetes.io~projected"
)

// podDir is the pod's directory, <root>/pods/<uid> (podconfig.PodDir).
func (m *Manager) podDir(uid types.UID) (string, error) {
	return podconfig.PodDir(m.RootDir, uid)
}

// volumeDir is a volume's directory, <pod dir>/volumes/<plugin>/<volume name>; a UID or volume name that
// cannot be a path segment is an error.
func (m *Manager) volumeDir(uid types.UID, plugin, name string) (string, error) {
	dir, err := m.podDir(uid)
	if err != nil {
		return "", err
	}
	if err := podrules.PathSegment("volume name", name); err != nil {
		return "", err
	}
	return filepath.Join(dir, "volumes", plugin, name), nil
}

// isEmptySource: a volume with no source is an emptyDir, as in the kubelet.
func isEmptySource(src *corev1.VolumeSource) bool {
	return sourceKind(src) == ""
}

// sourceKind is the JSON name of the volume's source ("persistentVolumeClaim", "csi", ...).
func sourceKind(src *corev1.VolumeSource) string { return jsonFieldSet(src) }

// jsonFieldSet is the JSON name of the first non-nil pointer field of the struct src points to: the
// kind of a volume source.
func jsonFieldSet(src any) string {
	v := reflect.ValueOf(src).Elem()
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.Pointer && !f.IsNil() {
			name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ",")
			return name
		}
	}
	return ""
}
