package allocation

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"k8s.io/apimachinery/pkg/api/equality"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/internal/atomicfile"
	"github.com/nodelet/nodelet/internal/checksum"
)

// The kubelet's checkpoint files, in its root directory.
const (
	AllocatedStateFile = "allocated_pods_state"
	ActuatedStateFile  = "actuated_pods_state"
)

// PodResources is what one record keeps of a pod: each resizable container's resources by name and the
// pod-level resources. Its fields carry no JSON tags, as the kubelet's PodResourceInfo: the checkpoint
// spells them with Go's names.
type PodResources struct {
	ContainerResources   map[string]corev1.ResourceRequirements
	PodLevelResources    *corev1.ResourceRequirements
	EmptyDirVolumeLimits map[string]*resource.Quantity `json:",omitempty"`
}

// checkpointData is the JSON inside a checkpoint's data string.
type checkpointData struct {
	Entries map[types.UID]PodResources `json:"entries,omitempty"`
}

// checkpointFile is the file: the data as a string and the checksum of that string.
type checkpointFile struct {
	Data     string `json:"data"`
	Checksum uint64 `json:"checksum"`
}

// store is one record (allocated or actuated) and its file. A nil-path store keeps its record in memory
// only. Its caller holds the lock.
type store struct {
	path    string
	entries map[types.UID]PodResources
	written string // the data last written or read, to skip writes that change nothing
}

// loadStore reads the record of path; a missing file is an empty record, a corrupt one an error that names
// the file (the kubelet refuses to start on it too).
func loadStore(path string) (*store, error) {
	s := &store{path: path, entries: map[types.UID]PodResources{}}
	if path == "" {
		return s, nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, err
	}
	var f checkpointFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", path, err)
	}
	if checksum.New(f.Data) != f.Checksum {
		return nil, fmt.Errorf("checkpoint %s is corrupt: checksum %d, want %d", path, f.Checksum, checksum.New(f.Data))
	}
	var d checkpointData
	if err := json.Unmarshal([]byte(f.Data), &d); err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", path, err)
	}
	if d.Entries != nil {
		s.entries = d.Entries
	}
	s.written = f.Data
	return s, nil
}

// save writes the record (atomically: a temporary file renamed over the old one) unless the file holds it
// already.
func (s *store) save() error {
	if s.path == "" {
		return nil
	}
	b, err := json.Marshal(checkpointData{Entries: s.entries})
	if err != nil {
		return err
	}
	data := string(b)
	if data == s.written {
		return nil
	}
	out, err := json.Marshal(checkpointFile{Data: data, Checksum: checksum.New(data)})
	if err != nil {
		return err
	}
	if err := atomicfile.Write(s.path, out, 0o600); err != nil {
		return err
	}
	s.written = data
	return nil
}

// set replaces the pod's entry; it reports whether that changed the record.
func (s *store) set(uid types.UID, e PodResources) bool {
	if old, ok := s.entries[uid]; ok && equality.Semantic.DeepEqual(old, e) {
		return false
	}
	s.entries[uid] = e
	return true
}
