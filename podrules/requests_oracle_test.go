package podrules

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
)

// oraclePods are pod specs that exercise every part of the requests and limits rule: regular containers,
// init containers, sidecars before and after them, overhead, zero and missing limits, and pod-level resources
// of supported and unsupported kinds.
func oraclePods() map[string]corev1.PodSpec {
	ctr := func(name string, req, lim corev1.ResourceList) corev1.Container {
		return corev1.Container{Name: name, Resources: reqLim(req, lim)}
	}
	ctrs := func(cs ...corev1.Container) []corev1.Container { return cs }
	return map[string]corev1.PodSpec{
		"empty":        {},
		"no resources": {Containers: ctrs(corev1.Container{Name: "a"})},
		"regular containers add up": {Containers: ctrs(
			ctr("a", rl("cpu", "100m", "memory", "64Mi"), rl("cpu", "200m")),
			ctr("b", rl("cpu", "300m", "ephemeral-storage", "1Gi"), rl("cpu", "1", "memory", "1Gi")))},
		"init container peak": {
			InitContainers: ctrs(ctr("i", rl("cpu", "2", "memory", "10Mi"), rl("cpu", "3"))),
			Containers:     ctrs(ctr("a", rl("cpu", "500m", "memory", "64Mi"), rl("memory", "128Mi")))},
		"sidecars before and after init containers": {
			InitContainers: ctrs(
				ctr("before", rl("cpu", "1"), rl("cpu", "2")),
				sidecar("s1", reqLim(rl("cpu", "300m", "memory", "1Gi"), rl("memory", "2Gi"))),
				ctr("after", rl("cpu", "1", "memory", "100Mi"), nil),
				sidecar("s2", reqLim(rl("cpu", "200m"), rl("cpu", "400m")))),
			Containers: ctrs(ctr("a", rl("cpu", "500m"), rl("cpu", "1")))},
		"overhead, a zero limit": {
			Containers: ctrs(ctr("a", rl("cpu", "100m", "memory", "64Mi"), rl("cpu", "1", "memory", "0"))),
			Overhead:   rl("cpu", "50m", "memory", "16Mi", "ephemeral-storage", "1Gi")},
		"huge pages": {Containers: ctrs(ctr("a", rl("hugepages-2Mi", "4Mi", "memory", "1Gi"), rl("hugepages-2Mi", "4Mi", "memory", "1Gi")))},
		"pod-level requests": {
			Resources:  &corev1.ResourceRequirements{Requests: rl("cpu", "2", "hugepages-1Gi", "1Gi")},
			Containers: ctrs(ctr("a", rl("cpu", "100m", "memory", "64Mi"), rl("memory", "128Mi"))),
			Overhead:   rl("cpu", "50m", "memory", "10Mi")},
		"pod-level limits": {
			Resources:  &corev1.ResourceRequirements{Limits: rl("memory", "1Gi", "cpu", "0")},
			Containers: ctrs(ctr("a", rl("memory", "64Mi"), rl("memory", "128Mi", "cpu", "1"))),
			Overhead:   rl("cpu", "50m", "memory", "10Mi")},
		"pod-level resources of an unsupported kind only": {
			Resources:  &corev1.ResourceRequirements{Requests: rl("ephemeral-storage", "1Gi"), Limits: rl("ephemeral-storage", "2Gi")},
			Containers: ctrs(ctr("a", rl("ephemeral-storage", "100Mi"), rl("ephemeral-storage", "200Mi")))},
		"pod-level resources and a sidecar": {
			Resources:      &corev1.ResourceRequirements{Requests: rl("memory", "2Gi", "ephemeral-storage", "1Gi"), Limits: rl("memory", "3Gi")},
			InitContainers: ctrs(sidecar("s", reqLim(rl("cpu", "300m", "memory", "1Gi"), rl("cpu", "1")))),
			Containers:     ctrs(ctr("a", rl("cpu", "100m"), rl("cpu", "1")))},
	}
}

// The kubelet computes a pod's requests and limits with the helper library k8s.io/component-helpers/resource;
// PodRequests, PodLimits and the pod-level predicates give what it gives (spec resources only: the pod's
// status plays no part), with each combination of options.
func TestPodRequestsAndLimitsAgreeWithTheKubeletsHelper(t *testing.T) {
	for name, spec := range oraclePods() {
		for _, opts := range []ResourceOptions{{}, {ExcludeOverhead: true}, {SkipPodLevelResources: true}, {ExcludeOverhead: true, SkipPodLevelResources: true}} {
			t.Run(fmt.Sprintf("%s %+v", name, opts), func(t *testing.T) {
				pod := &corev1.Pod{Spec: *spec.DeepCopy()}
				helperOpts := resourcehelper.PodResourcesOptions{ExcludeOverhead: opts.ExcludeOverhead, SkipPodLevelResources: opts.SkipPodLevelResources}
				if got, want := PodRequests(pod, opts), resourcehelper.PodRequests(pod, helperOpts); !equalResources(got, want) {
					t.Errorf("PodRequests = %s, the kubelet's helper gives %s", quantities(got), quantities(want))
				}
				if got, want := PodLimits(pod, opts), resourcehelper.PodLimits(pod, helperOpts); !equalResources(got, want) {
					t.Errorf("PodLimits = %s, the kubelet's helper gives %s", quantities(got), quantities(want))
				}
				if PodLevelResourcesSet(pod) != resourcehelper.IsPodLevelResourcesSet(pod) ||
					PodLevelRequestsSet(pod) != resourcehelper.IsPodLevelRequestsSet(pod) ||
					PodLevelLimitsSet(pod) != resourcehelper.IsPodLevelLimitsSet(pod) {
					t.Errorf("pod-level predicates (any %v, requests %v, limits %v) differ from the kubelet's helper",
						PodLevelResourcesSet(pod), PodLevelRequestsSet(pod), PodLevelLimitsSet(pod))
				}
			})
		}
	}
}

// quantities is l as "name=quantity" pairs in name order.
func quantities(l corev1.ResourceList) string {
	var out []string
	for name, q := range l {
		out = append(out, string(name)+"="+q.String())
	}
	slices.Sort(out)
	return "[" + strings.Join(out, " ") + "]"
}

func TestTotalRequests(t *testing.T) {
	pods := []*corev1.Pod{
		{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a", Resources: reqLim(rl("cpu", "100m", "memory", "64Mi"), nil)}}, Overhead: rl("cpu", "10m")}},
		{Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "i", Resources: reqLim(rl("cpu", "1"), nil)}},
			Containers:     []corev1.Container{{Name: "a", Resources: reqLim(rl("cpu", "200m", "ephemeral-storage", "1Gi"), nil)}},
		}},
		{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a"}}}},
	}
	if got, want := TotalRequests(pods, ResourceOptions{}), rl("cpu", "1110m", "memory", "64Mi", "ephemeral-storage", "1Gi"); !equalResources(got, want) {
		t.Errorf("TotalRequests = %v, want %v", got, want)
	}
	if got, want := TotalRequests(pods, ResourceOptions{ExcludeOverhead: true}), rl("cpu", "1100m", "memory", "64Mi", "ephemeral-storage", "1Gi"); !equalResources(got, want) {
		t.Errorf("TotalRequests without overhead = %v, want %v", got, want)
	}
	if got := TotalRequests(nil, ResourceOptions{}); len(got) != 0 {
		t.Errorf("TotalRequests of no pods = %v, want none", got)
	}
}
