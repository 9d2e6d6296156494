package volumes

import (
	"os"
	"path/filepath"
	"testing"
)

func TestOnSharedMountReadsThePropagationOfTheHoldingMount(t *testing.T) {
	info := filepath.Join(t.TempDir(), "mountinfo")
	content := `22 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw
30 22 8:1 /var/lib/kubelet /var/lib/kubelet rw,relatime shared:7 - ext4 /dev/sda1 rw
31 22 0:40 / /var/lib/other rw,relatime master:3 - tmpfs tmpfs rw
`
	if err := os.WriteFile(info, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]bool{
		"/var/lib/kubelet":      true,
		"/var/lib/kubelet/pods": true,
		"/var/lib/kubeletx":     false, // under /, which is private
		"/var/lib/other/x":      false, // a slave is not shared
		"/tmp":                  false,
	} {
		got, err := onSharedMount(path, info)
		if err != nil || got != want {
			t.Errorf("onSharedMount(%s) = %t, %v; want %t", path, got, err, want)
		}
	}
}
