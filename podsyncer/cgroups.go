package podsyncer

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/nodelet/nodelet/podrules"
	"github.com/nodelet/nodelet/runtime/podconfig"
)

// reasonFailedCreatePodContainer is the kubelet's event reason when it cannot make a pod's cgroup.
const reasonFailedCreatePodContainer = "FailedCreatePodContainer"

// ensurePodCgroup makes the pod's cgroup (the sandbox's cgroup parent) with the kubelet's pod limits
// before the sandbox runs. A failure is reported as the kubelet reports it, and the sandbox waits.
func (c *cgroupKeeper) ensurePodCgroup(ctx context.Context, ps *PodState, pod *corev1.Pod, cfg *runtimeapi.PodSandboxConfig) bool {
	if cfg.GetLinux().GetCgroupParent() == "" {
		return true
	}
	// The pod cgroup's name: the sandbox's cgroup parent is its path in the cgroup driver's layout.
	parent := podconfig.PodCgroupName(pod, c.sandboxOpts).ToCgroupfs()
	// As the kubelet, the QoS cgroups are brought up to date first; a failure there is only logged.
	if err := c.podCgroups.UpdateQoS(c.burstableMilliCPU()); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Failed to update QoS cgroups while syncing pod")
	}
	res := podrules.PodCgroupResources(pod, podrules.GetPodQOS(pod))
	if err := c.podCgroups.Ensure(parent, res); err != nil {
		c.recorder.Eventf(PodRef(pod), corev1.EventTypeWarning, reasonFailedCreatePodContainer, "unable to ensure pod container exists: %v", err)
		ctrl.LoggerFrom(ctx).Error(err, "Failed to ensure that the pod's cgroups exist and are correctly applied")
		return false
	}
	ps.podCgroup = &res
	return true
}

// burstableMilliCPU sums the cpu requests of the admitted, not terminated Burstable pods: the burstable
// QoS cgroup's share, as the kubelet's QoS container manager computes it.
func (c *cgroupKeeper) burstableMilliCPU() int64 {
	var sum int64
	for _, p := range c.admittedPods("") {
		if podrules.GetPodQOS(p) == corev1.PodQOSBurstable {
			reqs := podrules.PodRequests(p, podrules.ResourceOptions{})
			sum += reqs.Cpu().MilliValue()
		}
	}
	return sum
}

// removePodCgroup removes the pod's cgroup once its sandboxes are gone. One the runtime still fills is
// left to housekeeping.
func (c *cgroupKeeper) removePodCgroup(ctx context.Context, uid types.UID) {
	if err := c.podCgroups.Remove(uid); err != nil {
		ctrl.LoggerFrom(ctx).V(1).Info("Pod cgroup not removed yet", "podUID", uid, "err", err.Error())
	}
}
