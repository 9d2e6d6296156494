package checkpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/nodelet/nodelet/internal/atomicfile"
	"github.com/nodelet/nodelet/internal/checksum"
)

// File is the checkpoint's name in the device plugin directory.
const File = "kubelet_internal_checkpoint"

// DevicesPerNUMA are device IDs by the NUMA node they are on (-1: devices without topology).
type DevicesPerNUMA map[int64][]string

// PodDevicesEntry is one container's devices of one resource and the plugin's Allocate answer for the
// container, in protobuf.
type PodDevicesEntry struct {
	PodUID        string
	ContainerName string
	ResourceName  string
	DeviceIDs     DevicesPerNUMA
	AllocResp     []byte
}

// checkpointData is what the checksum covers: the assignments and the healthy devices of each registered
// resource.
type checkpointData struct {
	PodDeviceEntries  []PodDevicesEntry
	RegisteredDevices map[string][]string
}

// Data is the file's content.
type Data struct {
	Data     checkpointData
	Checksum uint64
}

// Read reads a checkpoint. A missing file is an empty checkpoint; an unreadable or corrupt one is an error
// that names the file.
func Read(path string) (entries []PodDevicesEntry, registered map[string][]string, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	var d Data
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, nil, fmt.Errorf("checkpoint %s: %w", path, err)
	}
	if sum := checksum.New(d.Data); sum != d.Checksum {
		return nil, nil, fmt.Errorf("checkpoint %s is corrupted: checksum %d, want %d", path, d.Checksum, sum)
	}
	return d.Data.PodDeviceEntries, d.Data.RegisteredDevices, nil
}

// Write writes a checkpoint atomically.
func Write(path string, entries []PodDevicesEntry, registered map[string][]string) error {
	data := checkpointData{PodDeviceEntries: entries, RegisteredDevices: registered}
	b, err := json.Marshal(Data{Data: data, Checksum: checksum.New(data)})
	if err != nil {
		return err
	}
	return atomicfile.Write(path, b, 0o600)
}
