package userns

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/nodelet/nodelet/internal/atomicfile"
	"github.com/nodelet/nodelet/podrules"
	"github.com/nodelet/nodelet/runtime/podconfig"
)

const (
	// unitLength is the granularity of user namespace sizes: a pod's range is a multiple of it.
	unitLength = 65536
	// DefaultIDsPerPod is the IDs a pod's user namespace maps without userNamespaces.idsPerPod.
	DefaultIDsPerPod = unitLength
	// mappingsFile is the file in a pod's directory that records its range (the kubelet's).
	mappingsFile = "userns"
	// handlersTTL is how long the runtime's handlers are taken as read (the kubelet reads them every 5 s).
	handlersTTL = 5 * time.Second
)

// RuntimeStatus is the runtime's status: its handlers and their features.
type RuntimeStatus interface {
	Status(ctx context.Context, verbose bool) (*runtimeapi.StatusResponse, error)
}

// Options configure a Manager.
type Options struct {
	// RootDir is the agent's root directory: pods' ranges are recorded in <RootDir>/pods/<uid>/userns.
	RootDir string
	// IDsPerPod is userNamespaces.idsPerPod (0: DefaultIDsPerPod).
	IDsPerPod int64
	// MaxPods is maxPods: the node's range must hold that many pods.
	MaxPods int
	// Runtime tells which runtime handlers support user namespaces.
	Runtime RuntimeStatus
	// Clock times the runtime handlers' reads (nil: the real clock).
	Clock clock.PassiveClock
	// Log is the manager's logger.
	Log logr.Logger
	// NodeRange gives the node's first ID and number of IDs for pods' user namespaces (nil: KubeletRange).
	NodeRange func(idsPerPod uint32) (first, length uint32, err error)
	// Rand picks a number in [0, n) (nil: math/rand), where the search for a free range starts.
	Rand func(n int) int
}

// Manager allocates pods' user namespaces.
type Manager struct {
	opts   Options
	length uint32 // IDs per pod
	off    uint32 // the node's first ID, in units of length
	slots  uint32 // the ranges the node has

	mu     sync.Mutex
	used   []bool
	usedBy map[types.UID]uint32 // pod → its first host ID

	hmu        sync.Mutex
	handlers   []*runtimeapi.RuntimeHandler
	handlersAt time.Time
}

// New builds the manager and records the ranges of the pods on disk. As the kubelet, it fails when the
// node's range does not suit idsPerPod and maxPods, and when a pod's recorded range cannot be read or
// conflicts with another's: a range it cannot account for could otherwise be given to a second pod.
func New(opts Options) (*Manager, error) {
	m, err := newManager(opts)
	if err != nil {
		return nil, fmt.Errorf("create user namespace manager: %w", err)
	}
	return m, nil
}

func newManager(opts Options) (*Manager, error) {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.NodeRange == nil {
		opts.NodeRange = KubeletRange
	}
	if opts.Rand == nil {
		opts.Rand = rand.IntN
	}
	length := uint32(DefaultIDsPerPod)
	if opts.IDsPerPod != 0 {
		length = uint32(opts.IDsPerPod)
	}
	first, n, err := opts.NodeRange(length)
	if err != nil {
		return nil, fmt.Errorf("kubelet mappings: %w", err)
	}
	if err := checkRange(length, first, n, opts.MaxPods); err != nil {
		return nil, err
	}
	m := &Manager{opts: opts, length: length, off: first / length, slots: n / length, usedBy: map[types.UID]uint32{}}
	m.used = make([]bool, m.slots)
	entries, err := os.ReadDir(filepath.Join(opts.RootDir, "pods"))
	if errors.Is(err, fs.ErrNotExist) {
		return m, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read pods from disk: %w", err)
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		uid := types.UID(e.Name())
		if err := m.recordFromDisk(uid); err != nil {
			return nil, fmt.Errorf("record pod mappings for existing pod %q: %w", uid, err)
		}
	}
	return m, nil
}

// checkRange checks the node's range (n IDs from first) for pods of length IDs each, as the kubelet.
func checkRange(length, first, n uint32, maxPods int) error {
	switch {
	case length%unitLength != 0:
		return fmt.Errorf("kubelet user namespace length %v is not a multiple of %d", length, unitLength)
	case first%length != 0:
		return fmt.Errorf("kubelet user assigned ID %v is not a multiple of %v", first, length)
	case first < length:
		return fmt.Errorf("kubelet user assigned ID %v must be greater or equal to %v", first, length)
	case n%length != 0:
		return fmt.Errorf("kubelet user assigned IDs length %v is not a multiple of %v", n, length)
	case int64(n/length) < int64(maxPods):
		return fmt.Errorf("kubelet user assigned IDs are not enough to support %v pods", maxPods)
	}
	return nil
}

// recordFromDisk records the range in the pod's file, if it has one.
func (m *Manager) recordFromDisk(uid types.UID) error {
	data, err := m.readFile(uid)
	if err != nil || len(data) == 0 {
		return err
	}
	mp, err := parse(data)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.record(uid, mp.HostID, mp.Length)
}

// filePath is <root>/pods/<uid>/userns.
func (m *Manager) filePath(uid types.UID) (string, error) {
	dir, err := podconfig.PodDir(m.opts.RootDir, uid)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, mappingsFile), nil
}

// readFile reads the pod's file; a pod without one has no range (nil, nil).
func (m *Manager) readFile(uid types.UID) ([]byte, error) {
	path, err := m.filePath(uid)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return data, err
}

// mappings is the file's JSON: the kubelet's runtimeapi.UserNamespace fields.
type mappings struct {
	UIDMappings []idMapping `json:"uidMappings"`
	GIDMappings []idMapping `json:"gidMappings"`
}

type idMapping struct {
	HostID      uint32 `json:"hostId"`
	ContainerID uint32 `json:"containerId"`
	Length      uint32 `json:"length"`
}

// parse checks a pod's file as the kubelet does.
func parse(data []byte) (idMapping, error) {
	var mp mappings
	if err := json.Unmarshal(data, &mp); err != nil {
		return idMapping{}, fmt.Errorf("invalid user namespace mappings file: %w", err)
	}
	switch {
	case len(mp.UIDMappings) != 1:
		return idMapping{}, errors.New("invalid user namespace configuration: no more than one mapping allowed.") //nolint:revive,staticcheck // the kubelet's message
	case len(mp.UIDMappings) != len(mp.GIDMappings):
		return idMapping{}, errors.New("invalid user namespace configuration: GID and UID mappings should be identical.") //nolint:revive,staticcheck // the kubelet's message
	case mp.UIDMappings[0] != mp.GIDMappings[0]:
		return idMapping{}, errors.New("invalid user namespace configuration: GID and UID mapping should be identical")
	case mp.UIDMappings[0].ContainerID != 0:
		return idMapping{}, errors.New("invalid user namespace configuration: UID 0 must be mapped")
	}
	return mp.UIDMappings[0], nil
}

// record marks the range from..from+length as the pod's.
func (m *Manager) record(uid types.UID, from, length uint32) error {
	if length != m.length {
		return fmt.Errorf("wrong user namespace length %v", length)
	}
	if from%m.length != 0 {
		return fmt.Errorf("wrong user namespace offset specified %v", from)
	}
	if prev, ok := m.usedBy[uid]; ok {
		if prev != from {
			return fmt.Errorf("different user namespace range already used by pod %q", uid)
		}
		return nil
	}
	index := int64(from/m.length) - int64(m.off)
	if index < 0 || index >= int64(m.slots) {
		return fmt.Errorf("id %v is out of range", from)
	}
	if m.used[index] {
		return fmt.Errorf("range picked for pod %q already taken", uid)
	}
	m.used[index], m.usedBy[uid] = true, from
	return nil
}

// PodUserNamespace is the user namespace of the pod's sandbox and containers on runtime handler handler:
// the node's for a pod that does not set hostUsers: false; else the pod's own range, read from its file or
// allocated (and recorded) now. It fails when the handler does not support user namespaces.
func (m *Manager) PodUserNamespace(ctx context.Context, pod *corev1.Pod, handler string) (*runtimeapi.UserNamespace, error) {
	if !podrules.OwnUserNamespace(pod) {
		return &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_NODE}, nil
	}
	if err := m.handlerSupports(ctx, handler); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	data, err := m.readFile(pod.UID)
	if err != nil {
		return nil, err
	}
	var mp idMapping
	if len(data) > 0 {
		if mp, err = parse(data); err == nil {
			err = m.record(pod.UID, mp.HostID, mp.Length)
		}
		if err != nil {
			return nil, fmt.Errorf("user namespace: %w", err)
		}
	} else if mp, err = m.allocate(pod.UID); err != nil {
		return nil, fmt.Errorf("create user namespace: %w", err)
	}
	ids := []*runtimeapi.IDMapping{{HostId: mp.HostID, ContainerId: 0, Length: mp.Length}}
	return &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_POD, Uids: ids, Gids: ids}, nil
}

// allocate gives the pod a free range, from a random place on, and records it in the pod's file. Called
// with m.mu held.
func (m *Manager) allocate(uid types.UID) (idMapping, error) {
	start := m.opts.Rand(int(m.slots))
	slot := -1
	for i := range int(m.slots) {
		if j := (start + i) % int(m.slots); !m.used[j] {
			slot = j
			break
		}
	}
	if slot < 0 {
		return idMapping{}, errors.New("could not find an empty slot to allocate a user namespace")
	}
	from := (uint32(slot) + m.off) * m.length
	m.used[slot], m.usedBy[uid] = true, from
	mp := idMapping{HostID: from, ContainerID: 0, Length: m.length}
	if err := m.write(uid, mp); err != nil {
		m.releaseLocked(uid)
		return idMapping{}, err
	}
	return mp, nil
}

// write records the pod's range in its file, atomically (the kubelet's compact JSON).
func (m *Manager) write(uid types.UID, mp idMapping) error {
	path, err := m.filePath(uid)
	if err != nil {
		return err
	}
	data, err := json.Marshal(mappings{UIDMappings: []idMapping{mp}, GIDMappings: []idMapping{mp}})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("create user namespace store: %w", err)
	}
	if err := atomicfile.Write(path, data, 0o600); err != nil {
		return fmt.Errorf("create user namespace store: %w", err)
	}
	return nil
}

// Release frees the pod's range and removes its file: the pod has terminated.
func (m *Manager) Release(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.releaseLocked(uid)
}

func (m *Manager) releaseLocked(uid types.UID) {
	from, ok := m.usedBy[uid]
	if !ok {
		return
	}
	delete(m.usedBy, uid)
	if path, err := m.filePath(uid); err == nil {
		_ = os.Remove(path)
	}
	m.used[from/m.length-m.off] = false
}

// RemoveOrphans releases the ranges of pods that are not active (neither known to the agent nor in the
// runtime) and of pods whose directory is gone, as the kubelet's housekeeping.
func (m *Manager) RemoveOrphans(active func(types.UID) bool) error {
	entries, err := os.ReadDir(filepath.Join(m.opts.RootDir, "pods"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("user namespace: read pods from disk: %w", err)
	}
	onDisk := map[types.UID]bool{}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range entries {
		uid := types.UID(e.Name())
		onDisk[uid] = true
		if !active(uid) {
			m.releaseLocked(uid)
		}
	}
	for uid := range m.usedBy {
		if !onDisk[uid] {
			m.releaseLocked(uid)
		}
	}
	return nil
}

// InUse is the number of ranges given to pods.
func (m *Manager) InUse() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.usedBy)
}

// handlerSupports says why the runtime handler cannot run a user namespaced pod (nil: it can), from the
// handlers the runtime last announced.
func (m *Manager) handlerSupports(ctx context.Context, handler string) error {
	handlers := m.runtimeHandlers(ctx)
	msg := "can't set `spec.hostUsers: false`, runtime does not support user namespaces"
	if handler != "" {
		msg = fmt.Sprintf("can't set `spec.hostUsers: false`, RuntimeClass handler %q does not support user namespaces", handler)
	}
	if len(handlers) == 0 {
		return errors.New(msg)
	}
	for _, h := range handlers {
		if h.GetName() == handler {
			if !h.GetFeatures().GetUserNamespaces() {
				return errors.New(msg)
			}
			return nil
		}
	}
	return fmt.Errorf("%s: the handler %q is not known", msg, handler)
}

// runtimeHandlers are the handlers of the runtime's last status that said it was ready, read again when
// older than handlersTTL.
func (m *Manager) runtimeHandlers(ctx context.Context) []*runtimeapi.RuntimeHandler {
	m.hmu.Lock()
	defer m.hmu.Unlock()
	if m.opts.Runtime == nil || (!m.handlersAt.IsZero() && m.opts.Clock.Since(m.handlersAt) < handlersTTL) {
		return m.handlers
	}
	s, err := m.opts.Runtime.Status(ctx, false)
	if err != nil {
		m.opts.Log.V(2).Info("Reading the runtime's handlers failed; using the last ones read", "err", err.Error())
		return m.handlers
	}
	for _, c := range s.GetStatus().GetConditions() {
		if c.GetType() == runtimeapi.RuntimeReady && !c.GetStatus() {
			return m.handlers
		}
	}
	m.handlers, m.handlersAt = s.GetRuntimeHandlers(), m.opts.Clock.Now()
	return m.handlers
}
