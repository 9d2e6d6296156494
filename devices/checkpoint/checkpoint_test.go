package checkpoint

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	kubelet "k8s.io/kubernetes/pkg/kubelet/cm/devicemanager/checkpoint"
)

// The kubelet reads what nodelet writes, and nodelet what the kubelet writes: the same JSON, the same
// checksum.
func TestTheKubeletsCheckpointFormat(t *testing.T) {
	entries := []PodDevicesEntry{{PodUID: "uid1", ContainerName: "c", ResourceName: "example.com/dev",
		DeviceIDs: DevicesPerNUMA{-1: {"a"}, 0: {"b", "c"}}, AllocResp: []byte{10, 1}}}
	registered := map[string][]string{"example.com/dev": {"a", "b"}, "x.io/y": {}}
	path := filepath.Join(t.TempDir(), File)
	if err := Write(path, entries, registered); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	theirs := &kubelet.Data{}
	if err := theirs.UnmarshalCheckpoint(b); err != nil {
		t.Fatal(err)
	}
	if err := theirs.VerifyChecksum(); err != nil {
		t.Fatalf("the kubelet's check of nodelet's checkpoint: %v", err)
	}

	kentries := []kubelet.PodDevicesEntry{{PodUID: "uid2", ContainerName: "d", ResourceName: "example.com/dev",
		DeviceIDs: kubelet.DevicesPerNUMA{-1: {"z"}}, AllocResp: []byte{1, 2, 3}}}
	blob, err := kubelet.New(kentries, map[string][]string{"example.com/dev": {"z"}}).MarshalCheckpoint()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, blob, 0o600); err != nil {
		t.Fatal(err)
	}
	got, reg, err := Read(path)
	if err != nil {
		t.Fatalf("nodelet's read of the kubelet's checkpoint: %v", err)
	}
	want := []PodDevicesEntry{{PodUID: "uid2", ContainerName: "d", ResourceName: "example.com/dev",
		DeviceIDs: DevicesPerNUMA{-1: {"z"}}, AllocResp: []byte{1, 2, 3}}}
	if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(reg, map[string][]string{"example.com/dev": {"z"}}) {
		t.Fatalf("read %+v %v", got, reg)
	}

	if err := os.WriteFile(path, []byte(`{"Data":{"PodDeviceEntries":null,"RegisteredDevices":{}},"Checksum":1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Read(path); err == nil {
		t.Fatal("a corrupt checkpoint reads")
	}
}
