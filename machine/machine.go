package machine

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"

	"github.com/moby/sys/userns"
)

// Info is what does not change while the machine runs.
type Info struct {
	MachineID     string
	SystemUUID    string
	BootID        string
	KernelVersion string
	OSImage       string
	OS            string
	Architecture  string
	NumCPU        int64
	MemoryBytes   int64
	// HugePages maps a page size in bytes to the bytes reserved in pages of that size; every size the kernel
	// has is there, 0 where no pages are reserved.
	HugePages map[int64]int64
	// SwapBytes is the host's swap (SwapTotal).
	SwapBytes int64
	// InUserNamespace is whether the agent runs in a user namespace other than the host's initial one
	// (rootless, or a node in a user namespaced container).
	InUserNamespace bool
}

// Signals are the eviction signals, observed now.
type Signals struct {
	// MemoryAvailableBytes is the kubelet's memory.available: capacity (MemTotal) minus the root memory
	// cgroup's working set (MemAvailable where no memory cgroup can be read).
	MemoryAvailableBytes int64
	// RootMemory is the root memory cgroup's figures (zero where it cannot be read).
	RootMemory           CgroupMemory
	NodeFsCapacityBytes  int64 // the root dir's filesystem size
	NodeFsAvailableBytes int64 // free to unprivileged users
	NodeFsInodes         int64
	NodeFsInodesFree     int64
	PIDMax               int64 // the lower of kernel.pid_max and kernel.threads-max
	PIDsInUse            int64 // processes and threads that exist
}

// Reader reads host facts from the filesystem rooted at HostRoot ("/" on a real node).
type Reader struct {
	HostRoot string // where /proc, /sys and /etc are; "" means "/"
	FsPath   string // the path whose filesystem is nodefs (the agent's root dir)
}

func (r Reader) path(p string) string {
	if r.HostRoot == "" {
		return p
	}
	return filepath.Join(r.HostRoot, p)
}

func (r Reader) readTrimmed(p string) (string, error) {
	b, err := os.ReadFile(r.path(p))
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// Info reads the machine's identity and capacity.
func (r Reader) Info() (Info, error) {
	info := Info{OS: goruntime.GOOS, Architecture: goruntime.GOARCH, NumCPU: int64(goruntime.NumCPU())}
	info.MachineID = r.firstReadable("/etc/machine-id", "/var/lib/dbus/machine-id")
	info.SystemUUID = strings.ToLower(r.firstReadable("/sys/class/dmi/id/product_uuid"))
	var err error
	if info.BootID, err = r.readTrimmed("/proc/sys/kernel/random/boot_id"); err != nil {
		return info, fmt.Errorf("read boot ID: %w", err)
	}
	if info.KernelVersion, err = r.KernelRelease(); err != nil {
		return info, err
	}
	info.OSImage = r.osImage()
	mem, err := r.meminfo()
	if err != nil {
		return info, err
	}
	info.MemoryBytes = mem["MemTotal"]
	info.SwapBytes = mem["SwapTotal"]
	info.HugePages = r.hugePages()
	info.InUserNamespace = userns.RunningInUserNS()
	return info, nil
}

func (r Reader) firstReadable(paths ...string) string {
	for _, p := range paths {
		if s, err := r.readTrimmed(p); err == nil && s != "" {
			return s
		}
	}
	return ""
}

// osImage is PRETTY_NAME from os-release, as the kubelet reports it.
func (r Reader) osImage() string {
	for _, p := range []string{"/etc/os-release", "/usr/lib/os-release"} {
		b, err := os.ReadFile(r.path(p))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "PRETTY_NAME="); ok {
				return strings.Trim(v, `"'`)
			}
		}
	}
	return "Linux"
}

// meminfo returns /proc/meminfo's fields in bytes.
func (r Reader) meminfo() (map[string]int64, error) {
	b, err := os.ReadFile(r.path("/proc/meminfo"))
	if err != nil {
		return nil, fmt.Errorf("read meminfo: %w", err)
	}
	out := map[string]int64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		v, err := strconv.ParseInt(fields[1], 10, 64)
		if err != nil {
			continue
		}
		if len(fields) == 3 && fields[2] == "kB" {
			v *= 1024
		}
		out[strings.TrimSuffix(fields[0], ":")] = v
	}
	if out["MemTotal"] == 0 {
		return nil, fmt.Errorf("read meminfo: no MemTotal")
	}
	return out, nil
}

// hugePages reads /sys/kernel/mm/hugepages/hugepages-<size>kB/nr_hugepages.
func (r Reader) hugePages() map[int64]int64 {
	out := map[int64]int64{}
	dirs, _ := filepath.Glob(r.path("/sys/kernel/mm/hugepages/hugepages-*kB"))
	for _, d := range dirs {
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimPrefix(filepath.Base(d), "hugepages-"), "kB"), 10, 64)
		if err != nil {
			continue
		}
		n, err := os.ReadFile(filepath.Join(d, "nr_hugepages"))
		if err != nil {
			continue
		}
		count, err := strconv.ParseInt(strings.TrimSpace(string(n)), 10, 64)
		if err != nil {
			continue
		}
		out[kb*1024] = count * kb * 1024
	}
	return out
}

// Signals observes the eviction signals now.
func (r Reader) Signals() (Signals, error) {
	var s Signals
	mem, err := r.meminfo()
	if err != nil {
		return s, err
	}
	r.memorySignals(&s, mem)
	if err := r.fsSignals(&s); err != nil {
		return s, err
	}
	if err := r.pidSignals(&s); err != nil {
		return s, err
	}
	return s, nil
}

// memorySignals measures memory.available as the kubelet: capacity less the root cgroup's working set.
func (r Reader) memorySignals(s *Signals, mem map[string]int64) {
	if root, err := r.RootMemory(); err == nil {
		s.RootMemory = root
		s.MemoryAvailableBytes = max(mem["MemTotal"]-root.WorkingSetBytes, 0)
	} else {
		avail, ok := mem["MemAvailable"]
		if !ok {
			avail = mem["MemFree"] + mem["Cached"] + mem["Buffers"]
		}
		s.MemoryAvailableBytes = avail
	}
}

func (r Reader) fsSignals(s *Signals) error {
	p := r.FsPath
	if p == "" {
		p = "/"
	}
	u, err := Statfs(p)
	if err != nil {
		return err
	}
	s.NodeFsCapacityBytes, s.NodeFsAvailableBytes = u.CapacityBytes, u.AvailableBytes
	s.NodeFsInodes, s.NodeFsInodesFree = u.Inodes, u.InodesFree
	return nil
}

func (r Reader) pidSignals(s *Signals) error {
	pidMax, err := r.readInt("/proc/sys/kernel/pid_max")
	if err != nil {
		return fmt.Errorf("read pid_max: %w", err)
	}
	if threadsMax, err := r.readInt("/proc/sys/kernel/threads-max"); err == nil && threadsMax < pidMax {
		pidMax = threadsMax
	}
	s.PIDMax = pidMax
	// /proc/loadavg's fourth field is "running/total" scheduling entities (processes and threads).
	load, err := r.readTrimmed("/proc/loadavg")
	if err != nil {
		return fmt.Errorf("read loadavg: %w", err)
	}
	fields := strings.Fields(load)
	if len(fields) < 4 {
		return fmt.Errorf("read loadavg: unexpected %q", load)
	}
	_, total, ok := strings.Cut(fields[3], "/")
	if !ok {
		return fmt.Errorf("read loadavg: unexpected %q", load)
	}
	if s.PIDsInUse, err = strconv.ParseInt(total, 10, 64); err != nil {
		return fmt.Errorf("read loadavg: %w", err)
	}
	return nil
}

func (r Reader) readInt(p string) (int64, error) {
	s, err := r.readTrimmed(p)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(s, 10, 64)
}

// Static is a machine whose facts and signals never change: for simulated nodes (testnode, hollow nodes)
// and tests.
type Static struct {
	Facts    Info
	Observed Signals
}

// Info returns the static facts.
func (s Static) Info() (Info, error) { return s.Facts, nil }

// Signals returns the static signals.
func (s Static) Signals() (Signals, error) { return s.Observed, nil }
