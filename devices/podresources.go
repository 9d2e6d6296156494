package devices

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/go-logr/logr"
	"golang.org/x/time/rate"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/nodelet/nodelet/podrules"
)

// The pod resources API's socket, in <root>/pod-resources, and the kubelet's rate limit on it.
const (
	PodResourcesSocket = "kubelet.sock"
	podResourcesQPS    = 100
	podResourcesBurst  = 10
)

// ClaimResources are the ResourceClaims a container uses and the devices prepared for them (dra.Manager).
type ClaimResources interface {
	DynamicResources(pod *corev1.Pod, c *corev1.Container) ([]*podresourcesapi.DynamicResource, error)
}

// PodResourcesServer serves the pod resources API (v1) from the device manager's assignments, the DRA
// manager's prepared claims and the node's pods. Without a static CPU or memory manager policy, no container has exclusive CPUs or memory: those
// fields stay empty, as with the kubelet's none policies.
type PodResourcesServer struct {
	podresourcesapi.UnimplementedPodResourcesListerServer
	Devices *Manager
	// Claims answers the containers' dynamic resources (nil: none).
	Claims ClaimResources
	// Pods lists the node's active pods (admitted, not terminated).
	Pods    func() []*corev1.Pod
	Log     logr.Logger
	limiter *rate.Limiter
}

// Serve listens on socket (its directory made if missing) until ctx ends.
func (s *PodResourcesServer) Serve(ctx context.Context, socket string) error {
	if err := os.MkdirAll(filepath.Dir(socket), 0o750); err != nil {
		return err
	}
	if err := os.Remove(socket); err != nil && !os.IsNotExist(err) {
		return err
	}
	lis, err := (&net.ListenConfig{}).Listen(ctx, "unix", socket)
	if err != nil {
		return fmt.Errorf("pod resources socket: %w", err)
	}
	if err := os.Chmod(socket, 0o600); err != nil {
		_ = lis.Close()
		return err
	}
	s.limiter = rate.NewLimiter(podResourcesQPS, podResourcesBurst)
	srv := grpc.NewServer(grpc.UnaryInterceptor(s.limit))
	podresourcesapi.RegisterPodResourcesListerServer(srv, s)
	s.Log.Info("Serving the pod resources API", "socket", socket)
	return serveGRPC(ctx, srv, lis)
}

// limit rejects calls beyond the kubelet's rate.
func (s *PodResourcesServer) limit(ctx context.Context, req any, _ *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
	if !s.limiter.Allow() {
		return nil, status.Error(codes.ResourceExhausted, "rejected by rate limit")
	}
	return next(ctx, req)
}

// List answers every active pod with its containers' devices.
func (s *PodResourcesServer) List(context.Context, *podresourcesapi.ListPodResourcesRequest) (*podresourcesapi.ListPodResourcesResponse, error) {
	resp := &podresourcesapi.ListPodResourcesResponse{}
	for _, pod := range s.Pods() {
		resp.PodResources = append(resp.PodResources, s.podResources(pod))
	}
	return resp, nil
}

// Get answers one active pod.
func (s *PodResourcesServer) Get(_ context.Context, req *podresourcesapi.GetPodResourcesRequest) (*podresourcesapi.GetPodResourcesResponse, error) {
	for _, pod := range s.Pods() {
		if pod.Name == req.PodName && pod.Namespace == req.PodNamespace {
			return &podresourcesapi.GetPodResourcesResponse{PodResources: s.podResources(pod)}, nil
		}
	}
	return nil, fmt.Errorf("pod %s in namespace %s not found", req.PodName, req.PodNamespace)
}

// GetAllocatableResources answers the healthy devices.
func (s *PodResourcesServer) GetAllocatableResources(context.Context, *podresourcesapi.AllocatableResourcesRequest) (*podresourcesapi.AllocatableResourcesResponse, error) {
	resp := &podresourcesapi.AllocatableResourcesResponse{}
	all := s.Devices.AllocatableDevices()
	for _, name := range sortedKeys(all) {
		for _, d := range all[name] {
			if len(d.GetTopology().GetNodes()) == 0 {
				resp.Devices = append(resp.Devices, &podresourcesapi.ContainerDevices{ResourceName: name, DeviceIds: []string{d.ID}})
				continue
			}
			for _, n := range d.Topology.Nodes {
				resp.Devices = append(resp.Devices, &podresourcesapi.ContainerDevices{ResourceName: name, DeviceIds: []string{d.ID},
					Topology: &podresourcesapi.TopologyInfo{Nodes: []*podresourcesapi.NUMANode{{ID: n.ID}}}})
			}
		}
	}
	return resp, nil
}

// podResources is one pod's answer: its sidecars, then its containers, each with its devices, one entry per
// device and NUMA node (init containers that run to completion are left out, as by the kubelet).
func (s *PodResourcesServer) podResources(pod *corev1.Pod) *podresourcesapi.PodResources {
	out := &podresourcesapi.PodResources{Name: pod.Name, Namespace: pod.Namespace}
	var names []string
	for i := range pod.Spec.InitContainers {
		if c := &pod.Spec.InitContainers[i]; podrules.IsSidecar(c) {
			names = append(names, c.Name)
		}
	}
	for _, c := range pod.Spec.Containers {
		names = append(names, c.Name)
	}
	for _, name := range names {
		cr := &podresourcesapi.ContainerResources{Name: name}
		byResource := s.Devices.ContainerDevices(pod.UID, name)
		for _, res := range sortedKeys(byResource) {
			cr.Devices = append(cr.Devices, resourceDevices(res, byResource[res])...)
		}
		cr.DynamicResources = s.dynamicResources(pod, name)
		out.Containers = append(out.Containers, cr)
	}
	return out
}

// dynamicResources are the container's claims and their devices; a failure is logged and answers none, as
// the kubelet's.
func (s *PodResourcesServer) dynamicResources(pod *corev1.Pod, name string) []*podresourcesapi.DynamicResource {
	if s.Claims == nil {
		return nil
	}
	c, _ := podrules.FindContainer(pod, name)
	if c == nil {
		return nil
	}
	dr, err := s.Claims.DynamicResources(pod, c)
	if err != nil {
		s.Log.Error(err, "Unable to get container claim info state", "pod", pod.Namespace+"/"+pod.Name, "container", name)
		return nil
	}
	return dr
}

// resourceDevices are one resource's devices of a container, one entry per device and NUMA node, by ID.
func resourceDevices(res string, byNUMA map[int64][]string) []*podresourcesapi.ContainerDevices {
	var out []*podresourcesapi.ContainerDevices
	for numa, ids := range byNUMA {
		for _, id := range ids {
			cd := &podresourcesapi.ContainerDevices{ResourceName: res, DeviceIds: []string{id}}
			if numa != nodeWithoutTopology {
				cd.Topology = &podresourcesapi.TopologyInfo{Nodes: []*podresourcesapi.NUMANode{{ID: numa}}}
			}
			out = append(out, cd)
		}
	}
	slices.SortFunc(out, func(a, b *podresourcesapi.ContainerDevices) int {
		if c := strings.Compare(a.DeviceIds[0], b.DeviceIds[0]); c != 0 {
			return c
		}
		return int(numaOf(a) - numaOf(b))
	})
	return out
}

// numaOf is the NUMA node of an entry (nodeWithoutTopology without one).
func numaOf(cd *podresourcesapi.ContainerDevices) int64 {
	if nodes := cd.GetTopology().GetNodes(); len(nodes) > 0 {
		return nodes[0].GetID()
	}
	return nodeWithoutTopology
}
