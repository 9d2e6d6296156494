package podconfig

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/podrules"
	"github.com/nodelet/nodelet/runtime"
)

// The kubelet's swap limits (configureContainerSwapResources) by cgroup version, swap behavior and QoS class.
// The node has 4Gi of memory and 1Gi of swap; the test pod's container requests 64Mi and is limited to 128Mi.
func TestContainerSwap(t *testing.T) {
	const nodeSwap = 1 << 30
	guaranteed := func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources = resources(rl("cpu", "1", "memory", "128Mi"), rl("cpu", "1", "memory", "128Mi"))
	}
	bestEffort := func(p *corev1.Pod) { p.Spec.Containers[0].Resources = corev1.ResourceRequirements{} }
	tests := []struct {
		name     string
		v2       bool
		noCtl    bool
		behavior string
		pod      func(*corev1.Pod)
		wantV1   int64  // MemorySwapLimitInBytes
		wantV2   string // Unified["memory.swap.max"], "" for unset
	}{
		{name: "v1, NoSwap by default: memory+swap = the memory limit", wantV1: 128 << 20},
		{name: "v1, LimitedSwap is NoSwap there", behavior: podrules.LimitedSwap, wantV1: 128 << 20},
		{name: "v1, best effort: no limit to match", pod: bestEffort},
		{name: "v1 without a swap controller: nothing", noCtl: true},
		{name: "v2 without a swap controller: nothing", v2: true, noCtl: true, behavior: podrules.LimitedSwap},
		{name: "v2, default behavior: no swap", v2: true, wantV2: "0"},
		{name: "v2, NoSwap", v2: true, behavior: podrules.NoSwap, wantV2: "0"},
		// 64Mi of the node's 4Gi is 1/64th of its 1Gi of swap.
		{name: "v2, LimitedSwap, burstable: its share of the node's swap", v2: true, behavior: podrules.LimitedSwap, wantV2: "16777216"},
		{name: "v2, LimitedSwap, guaranteed: none", v2: true, behavior: podrules.LimitedSwap, pod: guaranteed, wantV2: "0"},
		{name: "v2, LimitedSwap, best effort: none", v2: true, behavior: podrules.LimitedSwap, pod: bestEffort, wantV2: "0"},
		{name: "v2, LimitedSwap, critical pod: none", v2: true, behavior: podrules.LimitedSwap, wantV2: "0",
			pod: func(p *corev1.Pod) { p.Spec.Priority = ptr.To(podrules.SystemCriticalPriority) }},
		{name: "v2, LimitedSwap, burstable container without memory: none", v2: true, behavior: podrules.LimitedSwap, wantV2: "0",
			pod: func(p *corev1.Pod) { p.Spec.Containers[0].Resources = resources(rl("cpu", "100m"), rl("cpu", "200m")) }},
		{name: "v2, LimitedSwap, request above the node's memory: none", v2: true, behavior: podrules.LimitedSwap, wantV2: "0",
			pod: func(p *corev1.Pod) {
				p.Spec.Containers[0].Resources = resources(rl("memory", "5Gi"), rl("memory", "6Gi"))
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod, opts := testPod(), containerOpts()
			if tt.pod != nil {
				tt.pod(pod)
			}
			opts.CgroupV2, opts.SwapController, opts.SwapBehavior, opts.NodeSwap = tt.v2, !tt.noCtl, tt.behavior, nodeSwap
			cfg, err := ContainerConfig(pod, &pod.Spec.Containers[0], runtime.KindRegular, 0, opts)
			if err != nil {
				t.Fatal(err)
			}
			r := cfg.Linux.Resources
			if r.MemorySwapLimitInBytes != tt.wantV1 {
				t.Errorf("memory_swap_limit_in_bytes = %d, want %d", r.MemorySwapLimitInBytes, tt.wantV1)
			}
			if got, ok := r.Unified["memory.swap.max"]; got != tt.wantV2 || ok != (tt.wantV2 != "") {
				t.Errorf("memory.swap.max = %q (set %v), want %q", got, ok, tt.wantV2)
			}
		})
	}
}

// memory.oom.group is a cgroup v2 setting: never on v1, even without singleProcessOOMKill.
func TestContainerOOMGroupOnlyOnV2(t *testing.T) {
	for _, tt := range []struct {
		v2, single bool
		want       string
	}{{false, false, ""}, {true, false, "1"}, {true, true, ""}} {
		pod, opts := testPod(), containerOpts()
		opts.CgroupV2, opts.SingleProcessOOMKill = tt.v2, tt.single
		cfg, err := ContainerConfig(pod, &pod.Spec.Containers[0], runtime.KindRegular, 0, opts)
		if err != nil {
			t.Fatal(err)
		}
		if got := cfg.Linux.Resources.Unified["memory.oom.group"]; got != tt.want {
			t.Errorf("v2 %v, singleProcessOOMKill %v: memory.oom.group = %q, want %q", tt.v2, tt.single, got, tt.want)
		}
	}
}
