package agent

import (
	"errors"
	"fmt"
	"slices"

	"github.com/go-logr/logr"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/nodelet/nodelet/machine"
	"github.com/nodelet/nodelet/podcgroups"
	"github.com/nodelet/nodelet/runtime/podconfig"
)

// errSwapOn is the kubelet's refusal of a host with swap on (failSwapOn, true by default).
var errSwapOn = errors.New("running with swap on is not supported, please disable swap or set --fail-swap-on flag to false")

// errSingleProcessOOMKillV1 is the kubelet's refusal of singleProcessOOMKill false on cgroup v1, where the
// kernel cannot kill a container's processes as a group.
var errSingleProcessOOMKillV1 = errors.New("invalid configuration: singleProcessOOMKill must not be explicitly set to false when using cgroup v1")

// swapReader is what the swap check asks of the host.
type swapReader interface {
	SwapOn() (on bool, contents string, err error)
}

// checkSwap refuses a host with swap on unless failSwapOn is false, as the kubelet's container manager does at
// start; with failSwapOn false the node starts and says so.
func checkSwap(log logr.Logger, kc *kubeletconfigv1beta1.KubeletConfiguration, host swapReader) error {
	on, contents, err := host.SwapOn()
	if err != nil {
		return fmt.Errorf("failed to determine if swap is on: %w", err)
	}
	if !on {
		return nil
	}
	if kc.FailSwapOn == nil || *kc.FailSwapOn {
		return errSwapOn
	}
	log.Info("Swap is on, running with it as failSwapOn is false", "procSwaps", contents,
		"swapBehavior", kc.MemorySwap.SwapBehavior)
	return nil
}

// singleProcessOOMKill is the kubelet's singleProcessOOMKill: always on cgroup v1 (where setting it false is
// an error), false by default on v2 (an OOM kills the container's processes together).
func singleProcessOOMKill(kc *kubeletconfigv1beta1.KubeletConfiguration, unified bool) (bool, error) {
	if !unified {
		if kc.SingleProcessOOMKill != nil && !*kc.SingleProcessOOMKill {
			return false, errSingleProcessOOMKillV1
		}
		return true, nil
	}
	return kc.SingleProcessOOMKill != nil && *kc.SingleProcessOOMKill, nil
}

// hostResources are the containers' host resources from the configuration and the host's facts: the machine's
// huge page sizes and swap, the cgroup version and whether the memory controller limits swap.
func hostResources(kc *kubeletconfigv1beta1.KubeletConfiguration, info machine.Info, unified, swapController bool) (podconfig.HostResources, error) {
	single, err := singleProcessOOMKill(kc, unified)
	if err != nil {
		return podconfig.HostResources{}, err
	}
	sizes := make([]int64, 0, len(info.HugePages))
	for size := range info.HugePages {
		sizes = append(sizes, size)
	}
	slices.Sort(sizes)
	return podconfig.HostResources{
		HugePageSizes: sizes, CgroupV2: unified, SingleProcessOOMKill: single,
		SwapController: swapController, SwapBehavior: kc.MemorySwap.SwapBehavior, NodeSwap: info.SwapBytes,
	}, nil
}

// readHostResources reads the host once for hostResources: the machine, the cgroup filesystem at cgroupRoot.
func readHostResources(kc *kubeletconfigv1beta1.KubeletConfiguration, host machine.Reader, cgroupRoot string) (podconfig.HostResources, error) {
	info, err := host.Info()
	if err != nil {
		return podconfig.HostResources{}, err
	}
	unified, err := podcgroups.IsUnified(cgroupRoot)
	if err != nil {
		return podconfig.HostResources{}, err
	}
	return hostResources(kc, info, unified, podcgroups.SwapController(cgroupRoot, unified, "/proc/self/cgroup"))
}
