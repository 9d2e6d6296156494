package machine

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
)

// NetInterface is one network interface's counters.
type NetInterface struct {
	Name                                 string
	RxBytes, RxErrors, TxBytes, TxErrors uint64
}

// ignoredInterface is what cAdvisor leaves out of a network namespace's interfaces: the loopback and the
// host ends of containers' veth pairs and bridges it does not count as the machine's.
func ignoredInterface(name string) bool {
	for _, p := range []string{"lo", "veth", "docker", "nerdctl"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// NetDev reads the host's interfaces from /proc/net/dev (the agent's network namespace, the host's), in
// the file's order, without the loopback and veth ends.
func (r Reader) NetDev() ([]NetInterface, error) {
	b, err := os.ReadFile(r.path("/proc/net/dev"))
	if err != nil {
		return nil, err
	}
	var out []NetInterface
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue // the two header lines
		}
		name = strings.TrimSpace(name)
		f := strings.Fields(rest)
		if len(f) < 11 || ignoredInterface(name) {
			continue
		}
		n := func(i int) uint64 { v, _ := strconv.ParseUint(f[i], 10, 64); return v }
		// Receive: bytes packets errs drop fifo frame compressed multicast; transmit: bytes packets errs ...
		out = append(out, NetInterface{Name: name, RxBytes: n(0), RxErrors: n(2), TxBytes: n(8), TxErrors: n(10)})
	}
	return out, nil
}
