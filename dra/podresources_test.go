package dra

import (
	"testing"

	"google.golang.org/protobuf/proto"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// The pod resources API sees the claims a container uses with the devices their drivers prepared; a
// container without claims sees none, and a claim the node has not prepared makes the answer an error.
func TestDynamicResourcesOfAContainer(t *testing.T) {
	pod := claimPod("a", "shared")
	bd := newBed(t, allocatedClaim("shared", "gpu.example.com", pod))
	if _, err := bd.m.DynamicResources(pod, &pod.Spec.Containers[0]); err == nil {
		t.Fatal("a claim not prepared yet was answered")
	}
	if err := bd.m.PrepareResources(testCtx(t), pod); err != nil {
		t.Fatal(err)
	}
	got, err := bd.m.DynamicResources(pod, &pod.Spec.Containers[0])
	if err != nil {
		t.Fatal(err)
	}
	want := &podresourcesapi.DynamicResource{ClaimName: "shared", ClaimNamespace: "ns", ClaimResources: []*podresourcesapi.ClaimResource{{
		DriverName: "gpu.example.com", PoolName: "node-1", DeviceName: "dev-0",
		CdiDevices: []*podresourcesapi.CDIDevice{{Name: "gpu.example.com/dev=shared"}},
	}}}
	if len(got) != 1 || !proto.Equal(got[0], want) {
		t.Errorf("dynamic resources %v, want %v", got, want)
	}
	if got, err := bd.m.DynamicResources(pod, &pod.Spec.Containers[1]); err != nil || len(got) != 0 {
		t.Errorf("a container without claims: %v, %v", got, err)
	}
}
