package dra

import (
	"context"
	"encoding/json"
	"hash/crc32"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"
	drapbv1beta1 "k8s.io/kubelet/pkg/apis/dra/v1beta1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// fakePlugin is a DRA driver's kubelet plugin for tests: it prepares every claim with one device per
// claim (CDI ID <driver>/dev=<claim name>) and records the calls.
type fakePlugin struct {
	drapbv1.UnimplementedDRAPluginServer
	driver string
	fail   string // a claim name whose preparation fails

	mu         sync.Mutex
	prepared   []string // claim names, in the order of the calls
	unprepared []string
	srv        *grpc.Server
}

func (p *fakePlugin) NodePrepareResources(_ context.Context, req *drapbv1.NodePrepareResourcesRequest) (*drapbv1.NodePrepareResourcesResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	resp := &drapbv1.NodePrepareResourcesResponse{Claims: map[string]*drapbv1.NodePrepareResourceResponse{}}
	for _, c := range req.Claims {
		p.prepared = append(p.prepared, c.Name)
		if c.Name == p.fail {
			resp.Claims[c.Uid] = &drapbv1.NodePrepareResourceResponse{Error: "no such device"}
			continue
		}
		resp.Claims[c.Uid] = &drapbv1.NodePrepareResourceResponse{Devices: []*drapbv1.Device{{
			PoolName: "node-1", DeviceName: "dev-0", RequestNames: []string{"gpu"},
			CdiDeviceIds: []string{p.driver + "/dev=" + c.Name},
		}}}
	}
	return resp, nil
}

func (p *fakePlugin) NodeUnprepareResources(_ context.Context, req *drapbv1.NodeUnprepareResourcesRequest) (*drapbv1.NodeUnprepareResourcesResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	resp := &drapbv1.NodeUnprepareResourcesResponse{Claims: map[string]*drapbv1.NodeUnprepareResourceResponse{}}
	for _, c := range req.Claims {
		p.unprepared = append(p.unprepared, c.Name)
		resp.Claims[c.Uid] = &drapbv1.NodeUnprepareResourceResponse{}
	}
	return resp, nil
}

func (p *fakePlugin) calls() (prepared, unprepared []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.prepared...), append([]string(nil), p.unprepared...)
}

// serve runs the plugin on a socket in dir, speaking the v1 service or (v1beta1) the v1beta1 one.
func (p *fakePlugin) serve(t *testing.T, dir string, v1beta1 bool) string {
	t.Helper()
	endpoint := filepath.Join(dir, p.driver+".sock")
	l, err := net.Listen("unix", endpoint)
	if err != nil {
		t.Fatal(err)
	}
	p.srv = grpc.NewServer()
	if v1beta1 {
		drapbv1beta1.RegisterDRAPluginServer(p.srv, drapbv1beta1.V1ServerWrapper{DRAPluginServer: p})
	} else {
		drapbv1.RegisterDRAPluginServer(p.srv, p)
	}
	go func() { _ = p.srv.Serve(l) }()
	t.Cleanup(p.srv.Stop)
	return endpoint
}

// socketDir is a short directory for unix sockets (their paths are limited to 108 bytes).
func socketDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "dra")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

func scheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// allocatedClaim is a claim allocated one device of driver and reserved for the pods.
func allocatedClaim(name, driver string, pods ...*corev1.Pod) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)}}
	c.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
		Results: []resourceapi.DeviceRequestAllocationResult{{Request: "gpu", Driver: driver, Pool: "node-1", Device: "dev-0"}},
	}}
	for _, p := range pods {
		c.Status.ReservedFor = append(c.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: p.Name, UID: p.UID})
	}
	return c
}

// claimPod is a pod whose container "app" uses the claim (by name) for its request gpu.
func claimPod(name, claim string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)}}
	p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "dev", ResourceClaimName: ptr.To(claim)}}
	p.Spec.Containers = []corev1.Container{
		{Name: "app", Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "dev", Request: "gpu"}}}},
		{Name: "sidecar"},
	}
	return p
}

type bed struct {
	m      *Manager
	root   string
	plugin *fakePlugin
	client client.Client
}

func newBed(t *testing.T, objs ...client.Object) *bed {
	t.Helper()
	c := fake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(objs...).Build()
	root := t.TempDir()
	m, err := NewManager(Options{RootDir: root, NodeName: "node-1", Reader: c})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	p := &fakePlugin{driver: "gpu.example.com", fail: "broken"}
	endpoint := p.serve(t, socketDir(t), false)
	if err := m.Plugins().RegisterPlugin(ctx, p.driver, endpoint, []string{"v1.DRAPlugin"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Plugins().stop)
	return &bed{m: m, root: root, plugin: p, client: c}
}

func TestPrepareOncePerClaimAndUnprepareAfterTheLastPod(t *testing.T) {
	a, b := claimPod("a", "shared"), claimPod("b", "shared")
	bd := newBed(t, allocatedClaim("shared", "gpu.example.com", a, b))
	ctx := testCtx(t)
	for _, pod := range []*corev1.Pod{a, b} {
		if err := bd.m.PrepareResources(ctx, pod); err != nil {
			t.Fatalf("prepare %s: %v", pod.Name, err)
		}
	}
	if prepared, _ := bd.plugin.calls(); strings.Join(prepared, ",") != "shared" {
		t.Fatalf("NodePrepareResources for %v, want the shared claim once", prepared)
	}
	devs, err := bd.m.CDIDevices(b, &b.Spec.Containers[0])
	if err != nil || len(devs) != 1 || devs[0].Name != "gpu.example.com/dev=shared" {
		t.Fatalf("CDI devices of app: %v, %v", devs, err)
	}
	if devs, err := bd.m.CDIDevices(b, &b.Spec.Containers[1]); err != nil || len(devs) != 0 {
		t.Fatalf("a container without claims got %v, %v", devs, err)
	}

	if err := bd.m.UnprepareResources(ctx, a.UID); err != nil {
		t.Fatal(err)
	}
	if _, unprepared := bd.plugin.calls(); len(unprepared) != 0 {
		t.Fatalf("unprepared %v while pod b still uses the claim", unprepared)
	}
	if !bd.m.MightNeedToUnprepare(b.UID) || bd.m.MightNeedToUnprepare(a.UID) {
		t.Fatal("pod b holds the claim, pod a does not")
	}
	// Pod b is only known by its UID now (deleted from the API): the checkpoint says what it holds.
	if err := bd.m.UnprepareResources(ctx, b.UID); err != nil {
		t.Fatal(err)
	}
	if _, unprepared := bd.plugin.calls(); strings.Join(unprepared, ",") != "shared" {
		t.Fatalf("NodeUnprepareResources for %v, want the shared claim", unprepared)
	}
	if bd.m.MightNeedToUnprepare(b.UID) {
		t.Fatal("the claim is still recorded for pod b")
	}
}

func TestPrepareRefusesAClaimNotReservedForThePod(t *testing.T) {
	pod := claimPod("a", "other")
	bd := newBed(t, allocatedClaim("other", "gpu.example.com", claimPod("x", "other")))
	err := bd.m.PrepareResources(testCtx(t), pod)
	if err == nil || !strings.Contains(err.Error(), "is not allowed to use ResourceClaim other") {
		t.Fatalf("err = %v, want the kubelet's refusal", err)
	}
	if prepared, _ := bd.plugin.calls(); len(prepared) != 0 {
		t.Fatalf("prepared %v", prepared)
	}
}

func TestPrepareFailuresAreErrors(t *testing.T) {
	unallocated := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pending", UID: "uid-pending"}}
	unallocated.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: "a", UID: "uid-a"}}
	for _, tc := range []struct {
		claim string
		obj   client.Object
		want  string
	}{
		{"missing", nil, "fetch ResourceClaim missing"},
		{"pending", unallocated, "ResourceClaim pending: not allocated"},
		{"broken", allocatedClaim("broken", "gpu.example.com", claimPod("a", "")), "NodePrepareResources failed for ResourceClaim broken: no such device"},
		{"elsewhere", allocatedClaim("elsewhere", "other.example.com", claimPod("a", "")), "DRA driver other.example.com is not registered"},
	} {
		t.Run(tc.claim, func(t *testing.T) {
			var objs []client.Object
			if tc.obj != nil {
				objs = append(objs, tc.obj)
			}
			bd := newBed(t, objs...)
			pod := claimPod("a", tc.claim)
			err := bd.m.PrepareResources(testCtx(t), pod)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			// A pod whose claim failed part-way is released like any other.
			if err := bd.m.UnprepareResources(testCtx(t), pod.UID); err != nil {
				t.Fatal(err)
			}
			if bd.m.MightNeedToUnprepare(pod.UID) {
				t.Fatal("the failed claim is still recorded for the pod")
			}
		})
	}
}

func TestGeneratedClaimNamedByThePodStatus(t *testing.T) {
	pod := claimPod("a", "")
	pod.Spec.ResourceClaims[0] = corev1.PodResourceClaim{Name: "dev", ResourceClaimTemplateName: ptr.To("tmpl")}
	claim := allocatedClaim("a-dev-x7k2", "gpu.example.com", pod)
	claim.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "a", UID: pod.UID, Controller: ptr.To(true)}}
	bd := newBed(t, claim)
	ctx := testCtx(t)
	if err := bd.m.PrepareResources(ctx, pod); err == nil {
		t.Fatal("prepared a pod whose status names no generated claim yet")
	}
	pod.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "dev", ResourceClaimName: ptr.To("a-dev-x7k2")}}
	if err := bd.m.PrepareResources(ctx, pod); err != nil {
		t.Fatal(err)
	}
	devs, err := bd.m.CDIDevices(pod, &pod.Spec.Containers[0])
	if err != nil || len(devs) != 1 || devs[0].Name != "gpu.example.com/dev=a-dev-x7k2" {
		t.Fatalf("CDI devices: %v, %v", devs, err)
	}
}

func TestExtendedResourceBackedByAClaim(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", UID: "uid-a"}}
	pod.Spec.Containers = []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{"example.com/gpu": *resourceQuantity(1)}}}}
	pod.Status.ExtendedResourceClaimStatus = &corev1.PodExtendedResourceClaimStatus{ResourceClaimName: "a-extended-resources-abc",
		RequestMappings: []corev1.ContainerExtendedResourceRequest{{ContainerName: "app", ResourceName: "example.com/gpu", RequestName: "gpu"}}}
	bd := newBed(t, allocatedClaim("a-extended-resources-abc", "gpu.example.com", pod))
	if err := bd.m.PrepareResources(testCtx(t), pod); err != nil {
		t.Fatal(err)
	}
	devs, err := bd.m.CDIDevices(pod, &pod.Spec.Containers[0])
	if err != nil || len(devs) != 1 {
		t.Fatalf("CDI devices: %v, %v", devs, err)
	}
}

func TestCheckpointKeepsClaimsAcrossRestarts(t *testing.T) {
	a := claimPod("a", "c1")
	bd := newBed(t, allocatedClaim("c1", "gpu.example.com", a))
	ctx := testCtx(t)
	if err := bd.m.PrepareResources(ctx, a); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(bd.root, StateFile))
	if err != nil {
		t.Fatal(err)
	}
	// The kubelet's file: {"Data": "<JSON>", "Checksum": CRC-32 of Data}, kind DRACheckpoint.
	var cp struct {
		Data     string
		Checksum uint32
	}
	if err := json.Unmarshal(raw, &cp); err != nil || crc32.ChecksumIEEE([]byte(cp.Data)) != cp.Checksum {
		t.Fatalf("checkpoint %s: %v", raw, err)
	}
	for _, want := range []string{`"kind":"DRACheckpoint"`, `"apiVersion":"checkpoint.dra.kubelet.k8s.io/v1"`,
		`"ClaimUID":"uid-c1"`, `"PodUIDs":{"uid-a":{}}`, `"CDIDeviceIDs":["gpu.example.com/dev=c1"]`, `"ShareID":null`} {
		if !strings.Contains(cp.Data, want) {
			t.Errorf("checkpoint data %s lacks %s", cp.Data, want)
		}
	}

	// Restarted: the claim is known and released by UID alone, through the plugin.
	m2, err := NewManager(Options{RootDir: bd.root, NodeName: "node-1", Reader: bd.client})
	if err != nil {
		t.Fatal(err)
	}
	m2.plugins = bd.m.plugins
	if !m2.MightNeedToUnprepare(a.UID) {
		t.Fatal("the restarted manager lost the claim of pod a")
	}
	if err := m2.UnprepareOrphans(ctx, func(types.UID) bool { return false }); err != nil {
		t.Fatal(err)
	}
	if _, unprepared := bd.plugin.calls(); strings.Join(unprepared, ",") != "c1" {
		t.Fatalf("unprepared %v", unprepared)
	}

	// A corrupt file stops the start.
	if err := os.WriteFile(filepath.Join(bd.root, StateFile), []byte(`{"Data":"{}","Checksum":1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := NewManager(Options{RootDir: bd.root, NodeName: "node-1"}); err == nil || !strings.Contains(err.Error(), "corrupted") {
		t.Fatalf("corrupt checkpoint: err = %v", err)
	}
}

func TestV1beta1Plugin(t *testing.T) {
	a := claimPod("a", "c1")
	c := fake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(allocatedClaim("c1", "gpu.example.com", a)).Build()
	m, err := NewManager(Options{RootDir: t.TempDir(), NodeName: "node-1", Reader: c})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	p := &fakePlugin{driver: "gpu.example.com"}
	endpoint := p.serve(t, socketDir(t), true)
	if err := m.Plugins().ValidatePlugin(ctx, p.driver, endpoint, []string{"v1alpha4.Node"}); err == nil {
		t.Fatal("a plugin offering no known service was accepted")
	}
	if err := m.Plugins().RegisterPlugin(ctx, p.driver, endpoint, []string{"v1alpha4.Node", "v1beta1.DRAPlugin"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Plugins().stop)
	if err := m.PrepareResources(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := m.UnprepareResources(ctx, a.UID); err != nil {
		t.Fatal(err)
	}
	if prepared, unprepared := p.calls(); len(prepared) != 1 || len(unprepared) != 1 {
		t.Fatalf("calls: prepared %v, unprepared %v", prepared, unprepared)
	}
}

func resourceQuantity(n int64) *resource.Quantity { return resource.NewQuantity(n, resource.DecimalSI) }

// testCtx logs to the test.
func testCtx(t *testing.T) context.Context { return logr.NewContext(t.Context(), testr.New(t)) }
