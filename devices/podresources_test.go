package devices

import (
	"context"
	"strings"
	"testing"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"
	"k8s.io/utils/ptr"
)

// The pod resources API answers each admitted pod's sidecars and containers with their devices, one entry
// per device; init containers that run to completion are left out, as by the kubelet.
func TestPodResourcesAPI(t *testing.T) {
	dir := t.TempDir()
	b := newBed(t, dir)
	p := &plugin{opts: &pluginapi.DevicePluginOptions{}, devices: healthy("a", "b", "c"), update: make(chan []*pluginapi.Device)}
	if err := p.serve(t, dir, "dp.sock", "example.com/resource"); err != nil {
		t.Fatal(err)
	}
	b.waitFor(t, "three devices", func() bool { _, a := b.counts("example.com/resource"); return a == 3 })
	pod := devicePod("uid-1", "one", map[string]int64{"init": 1}, map[string]int64{"c": 2})
	pod.Spec.InitContainers = append(pod.Spec.InitContainers, corev1.Container{Name: "sidecar", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)})
	if err := b.m.Allocate(context.Background(), pod, holding()); err != nil {
		t.Fatal(err)
	}
	s := &PodResourcesServer{Devices: b.m, Pods: func() []*corev1.Pod { return []*corev1.Pod{pod} }, Log: testr.New(t)}

	list, err := s.List(context.Background(), &podresourcesapi.ListPodResourcesRequest{})
	if err != nil || len(list.PodResources) != 1 {
		t.Fatalf("List = %v, %v", list, err)
	}
	var got []string
	for _, c := range list.PodResources[0].Containers {
		var ids []string
		for _, d := range c.Devices {
			ids = append(ids, d.ResourceName+"="+strings.Join(d.DeviceIds, ","))
		}
		got = append(got, c.Name+":"+strings.Join(ids, " "))
	}
	if want := "sidecar: c:example.com/resource=a example.com/resource=b"; strings.Join(got, " ") != want {
		t.Fatalf("containers %q, want %q", strings.Join(got, " "), want)
	}
	if _, err := s.Get(context.Background(), &podresourcesapi.GetPodResourcesRequest{PodName: "two", PodNamespace: "default"}); err == nil ||
		err.Error() != "pod two in namespace default not found" {
		t.Fatalf("Get of an unknown pod: %v", err)
	}
	alloc, err := s.GetAllocatableResources(context.Background(), &podresourcesapi.AllocatableResourcesRequest{})
	if err != nil || len(alloc.Devices) != 3 {
		t.Fatalf("GetAllocatableResources = %v, %v", alloc, err)
	}
}

// claimsOf answers every container named "c" one claim.
type claimsOf struct{}

func (claimsOf) DynamicResources(_ *corev1.Pod, c *corev1.Container) ([]*podresourcesapi.DynamicResource, error) {
	if c.Name != "c" {
		return nil, nil
	}
	return []*podresourcesapi.DynamicResource{{ClaimName: "gpu", ClaimNamespace: "default"}}, nil
}

// A container's dynamic resources (its ResourceClaims) are answered beside its devices.
func TestPodResourcesAPIDynamicResources(t *testing.T) {
	b := newBed(t, t.TempDir())
	pod := devicePod("uid-1", "one", nil, map[string]int64{"c": 0})
	pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "other"})
	s := &PodResourcesServer{Devices: b.m, Claims: claimsOf{}, Pods: func() []*corev1.Pod { return []*corev1.Pod{pod} }, Log: testr.New(t)}
	got, err := s.Get(context.Background(), &podresourcesapi.GetPodResourcesRequest{PodName: "one", PodNamespace: pod.Namespace})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.PodResources.Containers) != 2 {
		t.Fatalf("containers %v, want c and other", got.PodResources.Containers)
	}
	for _, c := range got.PodResources.Containers {
		want := 0
		if c.Name == "c" {
			want = 1
		}
		if len(c.DynamicResources) != want {
			t.Errorf("container %s: dynamic resources %v, want %d", c.Name, c.DynamicResources, want)
		}
	}
}
