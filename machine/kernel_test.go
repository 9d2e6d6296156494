package machine

import (
	"os"
	"path/filepath"
	"testing"
)

func TestKernelRelease(t *testing.T) {
	root := t.TempDir()
	if _, err := (Reader{HostRoot: root}).KernelRelease(); err == nil {
		t.Fatal("KernelRelease without /proc/sys/kernel/osrelease: no error")
	}
	dir := filepath.Join(root, "proc/sys/kernel")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "osrelease"), []byte("6.1.0-18-amd64\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Reader{HostRoot: root}.KernelRelease()
	if err != nil || got != "6.1.0-18-amd64" {
		t.Fatalf("KernelRelease = %q, %v; want 6.1.0-18-amd64", got, err)
	}
}
