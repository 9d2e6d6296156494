package machine

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// CgroupMemory is a memory cgroup's figures as cAdvisor gives them to the kubelet: usage, and the working
// set (usage less inactive file pages, never below 0), which the kubelet's memory signals are made of.
type CgroupMemory struct {
	UsageBytes      int64
	WorkingSetBytes int64
	// LimitBytes is the cgroup's memory limit; 0 when unlimited (and for the root cgroup).
	LimitBytes int64
	// RSSBytes is the cgroup's anonymous memory (cgroup v1: total_rss; v2: anon), PageFaults and
	// MajorPageFaults its page faults (v1: the cgroup's own; v2: with its descendants'), as cAdvisor reports
	// them in the kubelet's summary.
	RSSBytes, PageFaults, MajorPageFaults int64
}

// unlimited is at or above what cgroup v1 reports for no limit (PAGE_COUNTER_MAX pages).
const unlimited = int64(1) << 62

// errNoMemoryCgroup: no memory cgroup controller is mounted where the reader looks.
var errNoMemoryCgroup = errors.New("no memory cgroup")

// RootMemory is the root memory cgroup's usage and working set: the node's, as the kubelet's
// memory.available signal measures it (capacity minus this working set). On cgroup v1 the usage is the
// root's memory.usage_in_bytes and the inactive file pages its memory.stat total_inactive_file; on cgroup v2,
// whose root has no memory.current, the usage is MemTotal - MemFree and the inactive file pages the root
// memory.stat inactive_file (runc's and cAdvisor's rule).
func (r Reader) RootMemory() (CgroupMemory, error) {
	return r.CgroupMemory("/")
}

// CgroupMemory reads the memory cgroup at path (a cgroupfs path such as "/kubepods") under the host's
// cgroup filesystem.
func (r Reader) CgroupMemory(path string) (CgroupMemory, error) {
	v1 := r.path(filepath.Join("/sys/fs/cgroup/memory", path))
	if _, err := os.Stat(filepath.Join(v1, "memory.usage_in_bytes")); err == nil {
		usage, err := r.readInt(filepath.Join("/sys/fs/cgroup/memory", path, "memory.usage_in_bytes"))
		if err != nil {
			return CgroupMemory{}, err
		}
		stat, err := readKeyed(filepath.Join(v1, "memory.stat"))
		if err != nil {
			return CgroupMemory{}, err
		}
		m := workingSet(usage, stat["total_inactive_file"])
		m.RSSBytes, m.PageFaults, m.MajorPageFaults = stat["total_rss"], stat["pgfault"], stat["pgmajfault"]
		if limit, err := r.readInt(filepath.Join("/sys/fs/cgroup/memory", path, "memory.limit_in_bytes")); err == nil && limit < unlimited {
			m.LimitBytes = limit
		}
		return m, nil
	}
	v2 := r.path(filepath.Join("/sys/fs/cgroup", path))
	stat, err := readKeyed(filepath.Join(v2, "memory.stat"))
	if err != nil {
		return CgroupMemory{}, fmt.Errorf("%w at %s: %w", errNoMemoryCgroup, path, err)
	}
	var usage int64
	if strings.Trim(path, "/") == "" {
		mem, err := r.meminfo()
		if err != nil {
			return CgroupMemory{}, err
		}
		usage = mem["MemTotal"] - mem["MemFree"]
	} else if usage, err = r.readInt(filepath.Join("/sys/fs/cgroup", path, "memory.current")); err != nil {
		return CgroupMemory{}, err
	}
	m := workingSet(usage, stat["inactive_file"])
	m.RSSBytes, m.PageFaults, m.MajorPageFaults = stat["anon"], stat["pgfault"], stat["pgmajfault"]
	if limit, err := r.readInt(filepath.Join("/sys/fs/cgroup", path, "memory.max")); err == nil { // "max" does not parse
		m.LimitBytes = limit
	}
	return m, nil
}

func workingSet(usage, inactiveFile int64) CgroupMemory {
	ws := usage - inactiveFile
	if ws < 0 {
		ws = 0
	}
	return CgroupMemory{UsageBytes: usage, WorkingSetBytes: ws}
}

// readKeyed reads a "key value" per line file such as memory.stat.
func readKeyed(file string) (map[string]int64, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
			out[k] = n
		}
	}
	return out, nil
}
