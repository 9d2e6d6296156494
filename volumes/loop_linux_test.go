package volumes

import (
	"os"
	"path/filepath"
	"testing"
)

// TestRealLoopDevice attaches a loop device over a file as the kubelet's `losetup -f --show` does (root, a
// kernel with loop devices), finds it again by its backing file — a second attach reuses it —, and detaches it.
func TestRealLoopDevice(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		t.Skip("no loop devices here:", err)
	}
	path := filepath.Join(t.TempDir(), "device")
	if err := os.WriteFile(path, make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	var m realMounter
	if err := m.AttachFileDevice(path); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.DetachFileDevice(path) })
	dev, err := loopDeviceOf(path)
	if err != nil || dev == "" {
		t.Fatalf("no loop device over %s after attach (%v)", path, err)
	}
	if err := m.AttachFileDevice(path); err != nil {
		t.Fatal(err)
	}
	if again, _ := loopDeviceOf(path); again != dev {
		t.Errorf("second attach: loop device %s, want %s again", again, dev)
	}
	if err := m.DetachFileDevice(path); err != nil {
		t.Fatal(err)
	}
	if left, _ := loopDeviceOf(path); left != "" {
		t.Errorf("loop device %s still over %s after detach", left, path)
	}
	if err := m.DetachFileDevice(path); err != nil {
		t.Errorf("detach with no loop device: %v", err)
	}
}
