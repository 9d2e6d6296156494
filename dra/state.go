package dra

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/nodelet/nodelet/internal/atomicfile"
)

// StateFile is the checkpoint's name in the root directory (the kubelet's dra_manager_state).
const StateFile = "dra_manager_state"

// The checkpoint's kind and version, as the kubelet writes them.
const (
	checkpointKind       = "DRACheckpoint"
	checkpointAPIVersion = "checkpoint.dra.kubelet.k8s.io/v1"
)

// ClaimState is what is kept of one prepared (or being prepared) claim: the pods of this node that use
// it, and what each of its drivers prepared. The field names are the kubelet's.
type ClaimState struct {
	ClaimUID    types.UID
	ClaimName   string
	Namespace   string
	PodUIDs     sets.Set[string]
	DriverState map[string]DriverState
}

// DriverState is what one driver prepared of a claim, and the node operations its allocation skips.
type DriverState struct {
	Devices            []Device
	SkipNodeOperations []resourceapi.SkipNodeOperation `json:"skipNodeOperations,omitempty"`
}

// Device is one device a driver prepared for a claim.
type Device struct {
	PoolName     string
	DeviceName   string
	ShareID      *types.UID
	RequestNames []string
	CDIDeviceIDs []string
}

// checkpointData is the checkpoint's data, which the checksum covers.
type checkpointData struct {
	metav1.TypeMeta
	ClaimInfoStateList []ClaimState
}

// checkpoint is the file: the data as a JSON string and its CRC-32 (IEEE).
type checkpoint struct {
	Data     string
	Checksum uint32
}

// readState reads the checkpoint at path; a missing file is no claims. A corrupt file is an error naming
// it: what it says was prepared cannot be known, and the kubelet then refuses to start as well.
func readState(path string) ([]ClaimState, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var cp checkpoint
	if err := json.Unmarshal(b, &cp); err != nil {
		return nil, fmt.Errorf("DRA checkpoint %s: %w", path, err)
	}
	if sum := crc32.ChecksumIEEE([]byte(cp.Data)); sum != cp.Checksum {
		return nil, fmt.Errorf("DRA checkpoint %s is corrupted: checksum %d, want %d", path, cp.Checksum, sum)
	}
	var data checkpointData
	if err := json.Unmarshal([]byte(cp.Data), &data); err != nil {
		return nil, fmt.Errorf("DRA checkpoint %s: %w", path, err)
	}
	for i := range data.ClaimInfoStateList {
		if data.ClaimInfoStateList[i].PodUIDs == nil {
			data.ClaimInfoStateList[i].PodUIDs = sets.New[string]()
		}
	}
	return data.ClaimInfoStateList, nil
}

// writeState writes the checkpoint at path atomically.
func writeState(path string, claims []ClaimState) error {
	data, err := json.Marshal(checkpointData{
		TypeMeta:           metav1.TypeMeta{Kind: checkpointKind, APIVersion: checkpointAPIVersion},
		ClaimInfoStateList: claims,
	})
	if err != nil {
		return err
	}
	b, err := json.Marshal(checkpoint{Data: string(data), Checksum: crc32.ChecksumIEEE(data)})
	if err != nil {
		return err
	}
	return atomicfile.Write(path, b, 0o600)
}
