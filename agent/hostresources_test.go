package agent

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/config"
	"github.com/nodelet/nodelet/machine"
	"github.com/nodelet/nodelet/podrules"
)

type fakeSwaps struct {
	on  bool
	err error
}

func (f fakeSwaps) SwapOn() (bool, string, error) {
	if f.on {
		return true, "Filename Type Size Used Priority\n/dev/vdb partition 1048572 0 -2", f.err
	}
	return false, "", f.err
}

// failSwapOn (true by default) refuses a host with swap on, with the kubelet's message; false starts with a log
// line; without swap nothing is said.
func TestCheckSwap(t *testing.T) {
	for _, tc := range []struct {
		name       string
		failSwapOn *bool
		host       fakeSwaps
		wantErr    string
		wantLog    bool
	}{
		{name: "swap off", host: fakeSwaps{}},
		{name: "swap on, failSwapOn by default", host: fakeSwaps{on: true},
			wantErr: "running with swap on is not supported, please disable swap or set --fail-swap-on flag to false"},
		{name: "swap on, failSwapOn true", failSwapOn: ptr.To(true), host: fakeSwaps{on: true}, wantErr: "please disable swap"},
		{name: "swap on, failSwapOn false", failSwapOn: ptr.To(false), host: fakeSwaps{on: true}, wantLog: true},
		{name: "swap off, failSwapOn false", failSwapOn: ptr.To(false), host: fakeSwaps{}},
		{name: "unreadable /proc/swaps", host: fakeSwaps{err: errors.New("permission denied")}, wantErr: "failed to determine if swap is on"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kc := &config.Default("node-a").Kubelet
			if tc.failSwapOn != nil {
				kc.FailSwapOn = tc.failSwapOn
			}
			var lines []string
			log := funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{})
			err := checkSwap(log, kc, tc.host)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("error %v, want %q", err, tc.wantErr)
			}
			logged := slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, "Swap is on") && strings.Contains(l, "/dev/vdb") })
			if logged != tc.wantLog {
				t.Errorf("log %q, want a 'Swap is on' line: %v", lines, tc.wantLog)
			}
		})
	}
}

// The kubelet's singleProcessOOMKill: always on cgroup v1 (explicitly false refused), false by default on v2.
func TestSingleProcessOOMKill(t *testing.T) {
	for _, tc := range []struct {
		set       *bool
		unified   bool
		want, err bool
	}{
		{nil, false, true, false}, {ptr.To(true), false, true, false}, {ptr.To(false), false, false, true},
		{nil, true, false, false}, {ptr.To(true), true, true, false}, {ptr.To(false), true, false, false},
	} {
		kc := &config.Default("node-a").Kubelet
		kc.SingleProcessOOMKill = tc.set
		got, err := singleProcessOOMKill(kc, tc.unified)
		if got != tc.want || (err != nil) != tc.err {
			t.Errorf("set %v, v2 %v: %v, %v; want %v, error %v", deref(tc.set), tc.unified, got, err, tc.want, tc.err)
		}
		if err != nil && !strings.Contains(err.Error(), "singleProcessOOMKill must not be explicitly set to false when using cgroup v1") {
			t.Errorf("message %q", err)
		}
	}
}

func deref(b *bool) any {
	if b == nil {
		return nil
	}
	return *b
}

// The containers' host resources: every huge page size of the machine (smallest first, reserved pages or
// not), the cgroup version, group OOM kill on v2 by default, and the swap settings.
func TestHostResources(t *testing.T) {
	kc := &config.Default("node-a").Kubelet
	kc.MemorySwap.SwapBehavior = podrules.LimitedSwap
	info := machine.Info{MemoryBytes: 8 << 30, SwapBytes: 2 << 30, HugePages: map[int64]int64{1 << 30: 0, 2 << 20: 64 << 20}}
	h, err := hostResources(kc, info, true, true)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(h.HugePageSizes, []int64{2 << 20, 1 << 30}) || !h.CgroupV2 || h.SingleProcessOOMKill ||
		!h.SwapController || h.SwapBehavior != podrules.LimitedSwap || h.NodeSwap != 2<<30 {
		t.Errorf("host resources %+v", h)
	}
	if h, err = hostResources(kc, machine.Info{}, false, false); err != nil || h.CgroupV2 || !h.SingleProcessOOMKill || len(h.HugePageSizes) != 0 {
		t.Errorf("cgroup v1 without huge pages: %+v, %v", h, err)
	}
}
