package eviction

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// Reason is the evicted pod's status reason and the event's.
const Reason = "Evicted"

// Annotations of the Evicted event (the kubelet's).
const (
	annotationOffendingContainers      = "offending_containers"
	annotationOffendingContainersUsage = "offending_containers_usage"
	annotationStarvedResource          = "starved_resource"
)

// message is the kubelet's eviction message and event annotations: the starved resource, the threshold
// and what was available, then each container using more than it requests.
func message(res corev1.ResourceName, pod *corev1.Pod, stats podStats, ts []Threshold, obs observations) (string, map[string]string) {
	msg := fmt.Sprintf("The node was low on resource: %v. ", res)
	for _, t := range ts {
		if signalResource[t.Signal] != res {
			continue
		}
		if o, ok := obs[t.Signal]; ok {
			msg += fmt.Sprintf("Threshold quantity: %v, available: %v. ", format(res, quantity(t.Value, o.capacity)), format(res, o.available))
		}
		break
	}
	ann := map[string]string{}
	s, ok := stats(pod.UID)
	if !ok {
		return msg, ann
	}
	var names, usages []string
	containers := append(append([]corev1.Container(nil), pod.Spec.Containers...), pod.Spec.InitContainers...)
	for _, cs := range s.Containers {
		for _, c := range containers {
			if c.Name != cs.Name {
				continue
			}
			req := c.Resources.Requests[res]
			usage := containerUsage(res, cs)
			if usage != nil && usage.Cmp(req) > 0 {
				msg += fmt.Sprintf("Container %s was using %s, request is %s, has larger consumption of %v. ", c.Name, usage.String(), req.String(), res)
				names, usages = append(names, c.Name), append(usages, usage.String())
			}
			break
		}
	}
	ann[annotationOffendingContainers] = strings.Join(names, ",")
	ann[annotationOffendingContainersUsage] = strings.Join(usages, ",")
	ann[annotationStarvedResource] = string(res)
	return msg, ann
}

// containerUsage is a container's use of res as the message reports it: its memory working set, or its
// writable layer plus logs; nil when unknown.
func containerUsage(res corev1.ResourceName, cs statsapi.ContainerStats) *resource.Quantity {
	switch res {
	case corev1.ResourceMemory:
		if cs.Memory != nil && cs.Memory.WorkingSetBytes != nil {
			return resource.NewQuantity(int64(*cs.Memory.WorkingSetBytes), resource.BinarySI)
		}
	case corev1.ResourceEphemeralStorage:
		if cs.Rootfs != nil && cs.Rootfs.UsedBytes != nil && cs.Logs != nil && cs.Logs.UsedBytes != nil {
			return resource.NewQuantity(int64(*cs.Rootfs.UsedBytes+*cs.Logs.UsedBytes), resource.BinarySI)
		}
	}
	return nil
}

// format prints an amount as the kubelet's quantities print: binary units for bytes, plain numbers for
// inodes and PIDs.
func format(res corev1.ResourceName, v int64) string {
	if res == corev1.ResourceMemory || res == corev1.ResourceEphemeralStorage {
		return resource.NewQuantity(v, resource.BinarySI).String()
	}
	return resource.NewQuantity(v, resource.DecimalSI).String()
}
