package takeover

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// EnterOptions say how a DaemonSet pod's nodelet enters the host.
type EnterOptions struct {
	// HostRoot is where the pod mounts the host's "/" (a hostPath volume), e.g. "/host".
	HostRoot string
	// BinDir is the host directory nodelet's binary is copied to, so that it can run in the host's mount
	// namespace (default /var/lib/nodelet/bin).
	BinDir string
	// Nsenter is the host's nsenter (default /usr/bin/nsenter, util-linux).
	Nsenter string
	// Args are the arguments of the nodelet started in the host's mount namespace.
	Args []string
	// Target is the process whose mount namespace is entered (default: the running kubelet's, as Finder
	// finds it once changed root to the host's, else PID 1's).
	Target int
	// Finder finds the running kubelet (its Proc and Root as seen once changed root to the host's).
	Finder Finder
}

// Enter copies the running binary into the host, changes root to the host's and replaces the process
// with the host's nsenter, which enters the mount namespace of the running kubelet (Finder.Find: never a
// process that only calls itself kubelet), or of the host's PID 1 when no kubelet runs (the pod runs with
// hostPID), and executes the copy with opts.Args. It returns only on failure, among them processes named
// kubelet of which none, or more than one, is the host's kubelet. A static Go binary cannot
// enter another mount namespace itself (setns of a mount namespace needs a single-threaded process).
func Enter(ctx context.Context, opts EnterOptions) error {
	if opts.HostRoot == "" {
		return errors.New("takeover: no host root")
	}
	if opts.BinDir == "" {
		opts.BinDir = "/var/lib/nodelet/bin"
	}
	if opts.Nsenter == "" {
		opts.Nsenter = "/usr/bin/nsenter"
	}
	bin := filepath.Join(opts.BinDir, "nodelet")
	if err := copyExecutable(filepath.Join(opts.HostRoot, bin)); err != nil {
		return fmt.Errorf("copy nodelet into the host: %w", err)
	}
	if err := syscall.Chroot(opts.HostRoot); err != nil {
		return fmt.Errorf("chroot %s: %w", opts.HostRoot, err)
	}
	if err := os.Chdir("/"); err != nil {
		return err
	}
	if _, err := os.Stat(opts.Nsenter); err != nil {
		return fmt.Errorf("the host has no %s (util-linux): %w", opts.Nsenter, err)
	}
	if opts.Target == 0 {
		k, ok, err := opts.Finder.Find(ctx)
		if err != nil {
			return fmt.Errorf("find the kubelet: %w", err)
		}
		opts.Target = 1
		if ok {
			opts.Target = k.PID
		}
	}
	argv := append([]string{opts.Nsenter, fmt.Sprintf("--target=%d", opts.Target), "--mount", "--", bin}, opts.Args...)
	return syscall.Exec(opts.Nsenter, argv, os.Environ())
}

// copyExecutable writes /proc/self/exe to dst atomically (a running copy is never overwritten in place).
func copyExecutable(dst string) error {
	src, err := os.Open("/proc/self/exe")
	if err != nil {
		return err
	}
	defer func() { _ = src.Close() }()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".nodelet-*")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := io.Copy(tmp, src); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o755); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dst)
}
