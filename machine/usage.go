package machine

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// userHZ is the kernel's USER_HZ: /proc/stat counts CPU time in 1/100 s on every Linux architecture.
const userHZ = 100

// Usage is the node's resource usage now.
type Usage struct {
	BootTime             time.Time
	CPUUsageNanoSeconds  uint64 // busy CPU time since boot, all cores
	MemoryTotalBytes     uint64
	MemoryAvailableBytes uint64
}

// Usage reads the node's CPU time since boot (/proc/stat), its memory (/proc/meminfo) and boot time.
func (r Reader) Usage() (Usage, error) {
	var u Usage
	stat, err := r.readTrimmed("/proc/stat")
	if err != nil {
		return u, fmt.Errorf("read /proc/stat: %w", err)
	}
	for _, line := range strings.Split(stat, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) > 8 && f[0] == "cpu":
			var busy uint64
			for i, v := range f[1:9] {
				if i == 3 || i == 4 { // idle, iowait
					continue
				}
				n, _ := strconv.ParseUint(v, 10, 64)
				busy += n
			}
			u.CPUUsageNanoSeconds = busy * uint64(time.Second/userHZ)
		case len(f) == 2 && f[0] == "btime":
			secs, _ := strconv.ParseInt(f[1], 10, 64)
			u.BootTime = time.Unix(secs, 0)
		}
	}
	mem, err := r.meminfo()
	if err != nil {
		return u, err
	}
	u.MemoryTotalBytes, u.MemoryAvailableBytes = uint64(mem["MemTotal"]), uint64(mem["MemAvailable"])
	return u, nil
}
