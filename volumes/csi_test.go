package volumes

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/prometheus/client_golang/prometheus"
	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"
)

// fakeCSI is one registered driver whose node service mounts into a fakeMounter, recording its calls.
type fakeCSI struct {
	mu         sync.Mutex
	name       string
	registered bool
	caps       map[csipb.NodeServiceCapability_RPC_Type]bool
	mounter    *fakeMounter
	calls      []string
	stageReqs  []*csipb.NodeStageVolumeRequest
	expandErr  error
	stageErr   error
	publishErr error
	pubReqs    []*csipb.NodePublishVolumeRequest
	expandReqs []*csipb.NodeExpandVolumeRequest
}

func (f *fakeCSI) NodeClient(driver string) (CSINodeClient, error) {
	if driver != f.name || !f.registered {
		return nil, fmt.Errorf("driver name %s not found in the list of registered CSI drivers", driver)
	}
	return f, nil
}

func (f *fakeCSI) NodeCapabilities(context.Context) (map[csipb.NodeServiceCapability_RPC_Type]bool, error) {
	return f.caps, nil
}

func (f *fakeCSI) record(call string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call)
}

func (f *fakeCSI) NodeStageVolume(_ context.Context, req *csipb.NodeStageVolumeRequest) error {
	f.record("stage " + req.VolumeId + " " + req.StagingTargetPath)
	f.stageReqs = append(f.stageReqs, req)
	if f.stageErr != nil {
		return f.stageErr
	}
	f.mounter.mu.Lock()
	defer f.mounter.mu.Unlock()
	f.mounter.mounted[req.StagingTargetPath] = "csi-stage " + req.VolumeId
	return nil
}

func (f *fakeCSI) NodeUnstageVolume(_ context.Context, id, staging string) error {
	f.record("unstage " + id + " " + staging)
	f.mounter.mu.Lock()
	defer f.mounter.mu.Unlock()
	delete(f.mounter.mounted, staging)
	return nil
}

func (f *fakeCSI) NodePublishVolume(_ context.Context, req *csipb.NodePublishVolumeRequest) error {
	f.record("publish " + req.VolumeId + " " + req.TargetPath)
	f.pubReqs = append(f.pubReqs, req)
	if f.publishErr != nil {
		return f.publishErr
	}
	if req.VolumeCapability.GetBlock() != nil {
		if err := os.WriteFile(req.TargetPath, nil, 0o600); err != nil {
			return err
		}
	} else if err := os.MkdirAll(req.TargetPath, 0o750); err != nil {
		return err
	}
	f.mounter.mu.Lock()
	defer f.mounter.mu.Unlock()
	f.mounter.mounted[req.TargetPath] = "csi " + req.VolumeId
	return nil
}

func (f *fakeCSI) NodeUnpublishVolume(_ context.Context, id, target string) error {
	f.record("unpublish " + id + " " + target)
	f.mounter.mu.Lock()
	delete(f.mounter.mounted, target)
	f.mounter.mu.Unlock()
	return os.RemoveAll(target)
}

func (f *fakeCSI) NodeGetVolumeStats(_ context.Context, id, path string) (*csipb.NodeGetVolumeStatsResponse, error) {
	f.record("stats " + id + " " + path)
	return &csipb.NodeGetVolumeStatsResponse{Usage: []*csipb.VolumeUsage{
		{Unit: csipb.VolumeUsage_BYTES, Total: 1 << 30, Available: 3 << 28, Used: 1 << 28},
		{Unit: csipb.VolumeUsage_INODES, Total: 1000, Available: 900, Used: 100},
	}}, nil
}

func (f *fakeCSI) callsWith(prefix string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.calls {
		if strings.HasPrefix(c, prefix) {
			out = append(out, c)
		}
	}
	return out
}

// fakeCSIObjects serves CSIDrivers and VolumeAttachments from maps.
type fakeCSIObjects struct {
	drivers     map[string]*storagev1.CSIDriver
	attachments map[string]*storagev1.VolumeAttachment
}

func (f *fakeCSIObjects) GetCSIDriver(_ context.Context, name string) (*storagev1.CSIDriver, error) {
	if d, ok := f.drivers[name]; ok {
		return d.DeepCopy(), nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Group: "storage.k8s.io", Resource: "csidrivers"}, name)
}

func (f *fakeCSIObjects) GetVolumeAttachment(_ context.Context, name string) (*storagev1.VolumeAttachment, error) {
	if va, ok := f.attachments[name]; ok {
		return va.DeepCopy(), nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Group: "storage.k8s.io", Resource: "volumeattachments"}, name)
}

const testDriver = "hostpath.csi.k8s.io"

func sha256Hex(s string) string { return fmt.Sprintf("%x", sha256.Sum256([]byte(s))) }

type csiEnv struct {
	*testEnv
	csi      *fakeCSI
	objs     *fakeCSIObjects
	inUseHit int
}

func newCSIEnv(t *testing.T, spec storagev1.CSIDriverSpec) *csiEnv {
	t.Helper()
	env := &csiEnv{testEnv: newTestEnv(t)}
	env.csi = &fakeCSI{name: testDriver, registered: true, mounter: env.mounter, caps: map[csipb.NodeServiceCapability_RPC_Type]bool{
		csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME: true}}
	env.objs = &fakeCSIObjects{drivers: map[string]*storagev1.CSIDriver{
		testDriver: {ObjectMeta: metav1.ObjectMeta{Name: testDriver}, Spec: spec}}, attachments: map[string]*storagev1.VolumeAttachment{}}
	env.m.CSI, env.m.CSIObjects = env.csi, env.objs
	env.m.InUseChanged = func() { env.inUseHit++ }
	return env
}

// bindCSIClaim binds claim ns/data to a CSI PersistentVolume pv-<handle>.
func (env *csiEnv) bindCSIClaim(handle string) {
	env.objects.bindClaim("ns", "data", "pv-"+handle, corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
		Driver: testDriver, VolumeHandle: handle, FSType: "ext4", VolumeAttributes: map[string]string{"kind": "test"}}})
	env.objects.pvs["pv-"+handle].Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
}

func (env *csiEnv) attach(handle string, meta map[string]string) {
	name := attachmentName(handle, testDriver, "node-1")
	env.objs.attachments[name] = &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: storagev1.VolumeAttachmentStatus{Attached: true, AttachmentMetadata: meta}}
}

func csiPod(uid string) *corev1.Pod {
	pod := mountingPod(claimVolume("data", "data", false))
	pod.UID = types.UID(uid)
	pod.Name = "pod-" + uid
	return pod
}

func readVolData(t *testing.T, dir string) map[string]string {
	t.Helper()
	data, err := loadVolData(dir)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestAttachableCSIVolumeIsInUseBeforeItIsMounted: the volume is listed in volumesInUse first; it is
// mounted only once the node's status reported it and its VolumeAttachment is attached; then it is staged
// and published with the kubelet's paths and vol_data.json, and the container mounts the published dir.
func TestAttachableCSIVolumeIsInUseBeforeItIsMounted(t *testing.T) {
	env := newCSIEnv(t, storagev1.CSIDriverSpec{PodInfoOnMount: ptr.To(true)})
	env.bindCSIClaim("vol-1")
	pod := csiPod("uid-1")
	ctx := context.Background()
	unique := corev1.UniqueVolumeName("kubernetes.io/csi/hostpath.csi.k8s.io^vol-1")

	// Waiting for the node's status, the attach/detach controller and the attacher is no failure: no
	// error (no FailedMount event), the pod is not ready.
	waits := func(stage string) {
		t.Helper()
		if errs := env.m.SetUp(ctx, pod); len(errs) != 0 || env.m.Ready(pod.UID) {
			t.Fatalf("%s: errors %v, ready %t; want a quiet wait", stage, errs, env.m.Ready(pod.UID))
		}
	}
	waits("before the in-use report")
	if got := env.m.VolumesInUse(); len(got) != 1 || got[0] != unique || env.inUseHit != 1 {
		t.Fatalf("VolumesInUse = %v (changes told %d), want [%s] told once", got, env.inUseHit, unique)
	}
	if calls := env.csi.callsWith(""); len(calls) != 0 {
		t.Fatalf("driver called before the volume was reported in use: %v", calls)
	}
	env.m.MarkVolumesReportedInUse([]corev1.UniqueVolumeName{unique})
	var attached []corev1.AttachedVolume
	env.m.AttachedVolumes = func(context.Context) ([]corev1.AttachedVolume, error) { return attached, nil }
	waits("before the node lists it attached")
	attached = []corev1.AttachedVolume{{Name: unique}}
	waits("before the VolumeAttachment exists")
	if calls := env.csi.callsWith(""); len(calls) != 0 {
		t.Fatalf("driver called before the volume was attached: %v", calls)
	}
	name := attachmentName("vol-1", testDriver, "node-1")
	env.objs.attachments[name] = &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: storagev1.VolumeAttachmentStatus{AttachError: &storagev1.VolumeError{Message: "rpc error: attach failed"}}}
	if errs := env.m.SetUp(ctx, pod); len(errs) != 1 || !strings.Contains(errs[0].Error(), "rpc error: attach failed") {
		t.Fatalf("an attach error is a failure: %v", errs)
	}
	env.attach("vol-1", map[string]string{"device": "/dev/fake"})
	if errs := env.m.SetUp(ctx, pod); len(errs) != 0 {
		t.Fatalf("SetUp once attached: %v", errs)
	}
	if !env.m.Ready(pod.UID) {
		t.Fatal("pod not ready with its volume published")
	}

	staging := filepath.Join(env.m.RootDir, "plugins/kubernetes.io/csi/hostpath.csi.k8s.io", sha256Hex("vol-1"), "globalmount")
	target := filepath.Join(env.m.RootDir, "pods/uid-1/volumes/kubernetes.io~csi/pv-vol-1/mount")
	if got := env.csi.callsWith(""); len(got) != 2 || got[0] != "stage vol-1 "+staging || got[1] != "publish vol-1 "+target {
		t.Fatalf("driver calls %v, want stage at %s then publish at %s", got, staging, target)
	}
	stage, pub := env.csi.stageReqs[0], env.csi.pubReqs[0]
	if stage.PublishContext["device"] != "/dev/fake" || pub.PublishContext["device"] != "/dev/fake" || pub.StagingTargetPath != staging {
		t.Errorf("publish context/staging path not passed: stage %v, publish %v", stage, pub)
	}
	if m := pub.VolumeCapability.GetMount(); m.FsType != "ext4" || pub.VolumeCapability.AccessMode.Mode != csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER {
		t.Errorf("capability %v", pub.VolumeCapability)
	}
	if pub.VolumeContext["csi.storage.k8s.io/pod.name"] != "pod-uid-1" || pub.VolumeContext["csi.storage.k8s.io/ephemeral"] != "false" ||
		pub.VolumeContext["kind"] != "test" {
		t.Errorf("volume context %v, want the attributes and the pod's information", pub.VolumeContext)
	}
	if d := readVolData(t, filepath.Dir(staging)); d["volumeHandle"] != "vol-1" || d["driverName"] != testDriver {
		t.Errorf("staging vol_data.json %v", d)
	}
	d := readVolData(t, filepath.Dir(target))
	want := map[string]string{"specVolID": "pv-vol-1", "volumeHandle": "vol-1", "driverName": testDriver, "nodeName": "node-1",
		"volumeLifecycleMode": "Persistent", "attachmentID": attachmentName("vol-1", testDriver, "node-1")}
	for k, v := range want {
		if d[k] != v {
			t.Errorf("pod vol_data.json %s = %q, want %q", k, d[k], v)
		}
	}
	mounts, err := env.m.Mounts(pod, &pod.Spec.Containers[0], nil)
	if err != nil || mounts[0].HostPath != target {
		t.Fatalf("mounts %v (%v), want %s", mounts, err, target)
	}
	// Every sync after: nothing called again.
	if errs := env.m.SetUp(ctx, pod); len(errs) != 0 || len(env.csi.callsWith("")) != 2 {
		t.Errorf("later SetUp: errors %v, calls %v", errs, env.csi.callsWith(""))
	}
}

// TestCSIPathsAreTheKubelets pins the on-disk names a takeover depends on.
func TestCSIPathsAreTheKubelets(t *testing.T) {
	m := &Manager{RootDir: "/var/lib/kubelet"}
	got, err := m.csiv().stagingPath("hostpath.csi.k8s.io", "vol-1")
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join("/var/lib/kubelet/plugins/kubernetes.io/csi/hostpath.csi.k8s.io", sha256Hex("vol-1"), "globalmount")
	if got != want {
		t.Errorf("staging path %s, want %s", got, want)
	}
	if a := attachmentName("vol-1", "hostpath.csi.k8s.io", "node-1"); a != "csi-"+sha256Hex("vol-1hostpath.csi.k8s.ionode-1") {
		t.Errorf("attachment name %s", a)
	}
	if u := UniqueCSIVolumeName("d", "h"); u != "kubernetes.io/csi/d^h" {
		t.Errorf("unique name %s", u)
	}
}

func TestCSIVolumeTornDownLastUserUnstages(t *testing.T) {
	env := newCSIEnv(t, storagev1.CSIDriverSpec{AttachRequired: ptr.To(false)})
	env.bindCSIClaim("vol-1")
	ctx := context.Background()
	a, b := csiPod("uid-a"), csiPod("uid-b")
	for _, p := range []*corev1.Pod{a, b} {
		if errs := env.m.SetUp(ctx, p); len(errs) != 0 {
			t.Fatalf("SetUp %s: %v", p.UID, errs)
		}
	}
	if got := env.csi.callsWith("stage"); len(got) != 1 {
		t.Errorf("stage calls %v, want one for the node", got)
	}
	if got := env.m.VolumesInUse(); len(got) != 0 {
		t.Errorf("a volume of a driver that does not attach is not reported in use: %v", got)
	}
	if err := env.m.TearDown(ctx, a.UID); err != nil {
		t.Fatal(err)
	}
	if got := env.csi.callsWith("unstage"); len(got) != 0 {
		t.Fatalf("unstaged while pod b still uses it: %v", got)
	}
	if err := env.m.TearDown(ctx, b.UID); err != nil {
		t.Fatal(err)
	}
	staging, _ := env.m.csiv().stagingPath(testDriver, "vol-1")
	if got := env.csi.callsWith("unstage"); len(got) != 1 || got[0] != "unstage vol-1 "+staging {
		t.Fatalf("unstage calls %v", got)
	}
	for _, dir := range []string{filepath.Dir(staging), filepath.Join(env.m.RootDir, "pods/uid-b/volumes")} {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%s left after teardown (%v)", dir, err)
		}
	}
}

// TestCSIVolumeOfAGonePodIsFoundOnDisk: a manager that never saw the pod (a restart, or a takeover from
// the kubelet) tears its volume down from the vol_data.json files, and adopts a running pod's published
// volume without publishing it again.
func TestCSIVolumeOfAGonePodIsFoundOnDisk(t *testing.T) {
	env := newCSIEnv(t, storagev1.CSIDriverSpec{AttachRequired: ptr.To(false)})
	env.bindCSIClaim("vol-1")
	ctx := context.Background()
	running, gone := csiPod("uid-run"), csiPod("uid-gone")
	for _, p := range []*corev1.Pod{running, gone} {
		if errs := env.m.SetUp(ctx, p); len(errs) != 0 {
			t.Fatal(errs)
		}
	}
	restarted := &Manager{RootDir: env.m.RootDir, Objects: env.objects, Clock: env.clock, NodeName: "node-1",
		Mounter: env.mounter, CSI: env.csi, CSIObjects: env.objs}
	// Before it syncs any pod, what is published on disk is in use for an attaching driver.
	env.objs.drivers[testDriver].Spec.AttachRequired = ptr.To(true)
	if got := restarted.VolumesInUse(); len(got) != 1 || got[0] != UniqueCSIVolumeName(testDriver, "vol-1") {
		t.Errorf("VolumesInUse after a restart = %v, want the published volume", got)
	}
	env.objs.drivers[testDriver].Spec.AttachRequired = ptr.To(false)
	calls := len(env.csi.callsWith(""))
	if errs := restarted.SetUp(ctx, running); len(errs) != 0 || len(env.csi.callsWith("")) != calls {
		t.Fatalf("adoption: errors %v, calls %v", errs, env.csi.callsWith("")[calls:])
	}
	if err := restarted.TearDown(ctx, gone.UID); err != nil {
		t.Fatal(err)
	}
	if got := env.csi.callsWith("unpublish"); len(got) != 1 || !strings.Contains(got[0], "uid-gone") {
		t.Errorf("unpublish calls %v", got)
	}
	if got := env.csi.callsWith("unstage"); len(got) != 0 {
		t.Errorf("unstaged while the running pod uses it: %v", got)
	}
}

func TestCSITearDownWaitsForItsDriver(t *testing.T) {
	env := newCSIEnv(t, storagev1.CSIDriverSpec{AttachRequired: ptr.To(false)})
	env.bindCSIClaim("vol-1")
	ctx := context.Background()
	pod := csiPod("uid-1")
	if errs := env.m.SetUp(ctx, pod); len(errs) != 0 {
		t.Fatal(errs)
	}
	env.csi.registered = false
	err := env.m.TearDown(ctx, pod.UID)
	if err == nil || !strings.Contains(err.Error(), "not found in the list of registered CSI drivers") {
		t.Fatalf("TearDown without the driver: %v", err)
	}
	target := filepath.Join(env.m.RootDir, "pods/uid-1/volumes/kubernetes.io~csi/pv-vol-1/mount")
	if _, ok := env.mounter.mounted[target]; !ok {
		t.Fatal("the published volume was unmounted behind its driver's back")
	}
	env.csi.registered = true
	if err := env.m.TearDown(ctx, pod.UID); err != nil {
		t.Fatalf("TearDown once the driver is back: %v", err)
	}
	if got := env.csi.callsWith("unpublish"); len(got) != 1 {
		t.Errorf("unpublish calls %v", got)
	}
}

func TestInlineCSIVolumeIsEphemeral(t *testing.T) {
	env := newCSIEnv(t, storagev1.CSIDriverSpec{VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecycleEphemeral},
		PodInfoOnMount: ptr.To(true)})
	pod := newPod(corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{
		Driver: testDriver, VolumeAttributes: map[string]string{"size": "1Mi"}}}})
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "scratch", MountPath: "/s"}}
	ctx := context.Background()
	if errs := env.m.SetUp(ctx, pod); len(errs) != 0 {
		t.Fatal(errs)
	}
	handle := "csi-" + sha256Hex("uid-1scratch")
	target := filepath.Join(env.m.RootDir, "pods/uid-1/volumes/kubernetes.io~csi/scratch/mount")
	if got := env.csi.callsWith(""); len(got) != 1 || got[0] != "publish "+handle+" "+target {
		t.Fatalf("calls %v, want one publish of %s (no stage, no attach)", got, handle)
	}
	if env.csi.pubReqs[0].VolumeContext["csi.storage.k8s.io/ephemeral"] != "true" {
		t.Errorf("volume context %v", env.csi.pubReqs[0].VolumeContext)
	}
	if err := env.m.TearDown(ctx, pod.UID); err != nil {
		t.Fatal(err)
	}
	if got := env.csi.callsWith("unstage"); len(got) != 0 || len(env.csi.callsWith("unpublish")) != 1 {
		t.Errorf("teardown calls %v", env.csi.callsWith(""))
	}

	// A driver that only does persistent volumes refuses an inline one.
	env.objs.drivers[testDriver].Spec.VolumeLifecycleModes = nil
	pod.UID = "uid-2"
	errs := env.m.SetUp(ctx, pod)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), `volume mode "Ephemeral" not supported by driver`) {
		t.Errorf("errors %v", errs)
	}
}

func TestCSIDriverNotRegisteredSays(t *testing.T) {
	env := newCSIEnv(t, storagev1.CSIDriverSpec{AttachRequired: ptr.To(false)})
	env.csi.registered = false
	env.bindCSIClaim("vol-1")
	errs := env.m.SetUp(context.Background(), csiPod("uid-1"))
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), `MountVolume.SetUp failed for volume "pv-vol-1" : driver name hostpath.csi.k8s.io not found in the list of registered CSI drivers`) {
		t.Errorf("errors %v", errs)
	}
}

// TestStagedVolumeLeftBehindIsUnstaged: a volume staged with no pod publishing it (its pod went while the
// agent was away) is unstaged by the cleanup pass; one a pod uses is left.
func TestStagedVolumeLeftBehindIsUnstaged(t *testing.T) {
	env := newCSIEnv(t, storagev1.CSIDriverSpec{AttachRequired: ptr.To(false)})
	env.bindCSIClaim("vol-1")
	ctx := context.Background()
	pod := csiPod("uid-1")
	if errs := env.m.SetUp(ctx, pod); len(errs) != 0 {
		t.Fatal(errs)
	}
	if err := env.m.CleanUpStaged(ctx); err != nil || len(env.csi.callsWith("unstage")) != 0 {
		t.Fatalf("cleanup unstaged a volume in use: %v, calls %v", err, env.csi.callsWith("unstage"))
	}
	// The pod's directory goes behind the manager's back (unpublished by a previous agent), and the
	// manager restarts: the staged volume is an orphan.
	target := filepath.Join(env.m.RootDir, "pods/uid-1/volumes/kubernetes.io~csi/pv-vol-1/mount")
	if err := env.csi.NodeUnpublishVolume(ctx, "vol-1", target); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(env.m.RootDir, "pods/uid-1")); err != nil {
		t.Fatal(err)
	}
	restarted := &Manager{RootDir: env.m.RootDir, Objects: env.objects, Clock: env.clock, NodeName: "node-1",
		Mounter: env.mounter, CSI: env.csi, CSIObjects: env.objs}
	if err := restarted.CleanUpStaged(ctx); err != nil {
		t.Fatal(err)
	}
	staging, _ := restarted.csiv().stagingPath(testDriver, "vol-1")
	if got := env.csi.callsWith("unstage"); len(got) != 1 || got[0] != "unstage vol-1 "+staging {
		t.Fatalf("unstage calls %v", got)
	}
	if _, err := os.Stat(filepath.Dir(staging)); !os.IsNotExist(err) {
		t.Errorf("staging directory left: %v", err)
	}
}

// TestClaimedVolumeStatsAndMetrics: a CSI volume is measured by its driver (with GET_VOLUME_STATS), a local
// one by statfs; each carries its claim, and /metrics has the kubelet's kubelet_volume_stats_* per claim.
func TestClaimedVolumeStatsAndMetrics(t *testing.T) {
	env := newCSIEnv(t, storagev1.CSIDriverSpec{AttachRequired: ptr.To(false)})
	env.csi.caps[csipb.NodeServiceCapability_RPC_GET_VOLUME_STATS] = true
	env.bindCSIClaim("vol-1")
	ctx := context.Background()
	pod := csiPod("uid-1")
	if errs := env.m.SetUp(ctx, pod); len(errs) != 0 {
		t.Fatal(errs)
	}
	var claimed *statsapi.VolumeStats
	for _, vs := range env.m.Stats(pod.UID) {
		if vs.PVCRef != nil {
			claimed = &vs
		}
	}
	if claimed == nil || claimed.Name != "data" || claimed.PVCRef.Name != "data" || claimed.PVCRef.Namespace != "ns" ||
		*claimed.CapacityBytes != 1<<30 || *claimed.UsedBytes != 1<<28 || *claimed.InodesFree != 900 {
		t.Fatalf("claimed volume stats %+v", claimed)
	}
	reg := prometheus.NewRegistry()
	if err := env.m.RegisterMetrics(reg); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP kubelet_volume_stats_used_bytes Number of used bytes in the volume
# TYPE kubelet_volume_stats_used_bytes gauge
kubelet_volume_stats_used_bytes{namespace="ns",persistentvolumeclaim="data"} 2.68435456e+08
`
	if err := promtestutil.GatherAndCompare(reg, strings.NewReader(want), "kubelet_volume_stats_used_bytes"); err != nil {
		t.Error(err)
	}
	if n, err := promtestutil.GatherAndCount(reg, "kubelet_volume_stats_capacity_bytes", "kubelet_volume_stats_available_bytes",
		"kubelet_volume_stats_used_bytes", "kubelet_volume_stats_inodes", "kubelet_volume_stats_inodes_free",
		"kubelet_volume_stats_inodes_used"); err != nil || n != 6 {
		t.Errorf("%d series (%v), want the six kubelet_volume_stats_* of one claim", n, err)
	}
}

func (f *fakeCSI) NodeExpandVolume(_ context.Context, req *csipb.NodeExpandVolumeRequest) error {
	f.record(fmt.Sprintf("expand %s %s %d", req.VolumeId, req.VolumePath, req.CapacityRange.RequiredBytes))
	f.mu.Lock()
	f.expandReqs = append(f.expandReqs, req)
	f.mu.Unlock()
	return f.expandErr
}

// fakeClaimStatus applies status patches to the fake objects' claims.
type fakeClaimStatus struct {
	objects *fakeObjects
	patches []*corev1.PersistentVolumeClaim
}

func (f *fakeClaimStatus) PatchClaimStatus(_ context.Context, _, updated *corev1.PersistentVolumeClaim) error {
	f.patches = append(f.patches, updated.DeepCopy())
	f.objects.mu.Lock()
	defer f.objects.mu.Unlock()
	f.objects.claims[updated.Namespace+"/"+updated.Name].Status = *updated.Status.DeepCopy()
	return nil
}

// expandingEnv is a driver that expands on the node, a claim of 1Gi bound to a 1Gi CSI volume, and a
// pod with it published.
func expandingEnv(t *testing.T) (*csiEnv, *fakeClaimStatus, *corev1.PersistentVolumeClaim, *corev1.Pod) {
	t.Helper()
	env := newCSIEnv(t, storagev1.CSIDriverSpec{AttachRequired: ptr.To(false)})
	env.csi.caps[csipb.NodeServiceCapability_RPC_EXPAND_VOLUME] = true
	cs := &fakeClaimStatus{objects: env.objects}
	env.m.ClaimStatus = cs
	env.bindCSIClaim("vol-1")
	claim := env.objects.claims["ns/data"]
	claim.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}
	env.objects.pvs["pv-vol-1"].Spec.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}
	pod := csiPod("uid-1")
	if errs := env.m.SetUp(context.Background(), pod); len(errs) != 0 {
		t.Fatal(errs)
	}
	return env, cs, claim, pod
}

// TestPublishedVolumeIsExpandedOnTheNode: once the resizer grew the volume and asks for node expansion,
// the next sync expands it through the driver and finishes the claim as the kubelet does.
func TestPublishedVolumeIsExpandedOnTheNode(t *testing.T) {
	env, cs, claim, pod := expandingEnv(t)
	rec := record.NewFakeRecorder(10)
	env.m.Recorder = rec
	ctx := context.Background()
	// The volume grew, but until the resizer asks for node expansion nothing happens on the node.
	env.objects.pvs["pv-vol-1"].Spec.Capacity[corev1.ResourceStorage] = resource.MustParse("2Gi")
	if errs := env.m.SetUp(ctx, pod); len(errs) != 0 || len(env.csi.callsWith("expand")) != 0 {
		t.Fatalf("expanded without NodeResizePending: %v %v", errs, env.csi.callsWith("expand"))
	}
	claim.Status.AllocatedResourceStatuses = map[corev1.ResourceName]corev1.ClaimResourceStatus{
		corev1.ResourceStorage: corev1.PersistentVolumeClaimNodeResizePending}
	claim.Status.Conditions = []corev1.PersistentVolumeClaimCondition{{Type: corev1.PersistentVolumeClaimFileSystemResizePending, Status: corev1.ConditionTrue}}
	if errs := env.m.SetUp(ctx, pod); len(errs) != 0 {
		t.Fatal(errs)
	}
	target := filepath.Join(env.m.RootDir, "pods/uid-1/volumes/kubernetes.io~csi/pv-vol-1/mount")
	if got := env.csi.callsWith("expand"); len(got) != 1 || got[0] != fmt.Sprintf("expand vol-1 %s %d", target, int64(2<<30)) {
		t.Fatalf("expand calls %v", got)
	}
	if len(cs.patches) != 2 || cs.patches[0].Status.AllocatedResourceStatuses[corev1.ResourceStorage] != corev1.PersistentVolumeClaimNodeResizeInProgress {
		t.Fatalf("patches %v, want NodeResizeInProgress then done", cs.patches)
	}
	done := env.objects.claims["ns/data"].Status
	if c := done.Capacity[corev1.ResourceStorage]; c.String() != "2Gi" || done.AllocatedResourceStatuses != nil || len(done.Conditions) != 0 {
		t.Errorf("claim status after expansion %+v", done)
	}
	if len(rec.Events) != 2 || !strings.HasPrefix(<-rec.Events, `Normal FileSystemResizeSuccessful MountVolume.NodeExpandVolume succeeded for volume "pv-vol-1" node-1`) {
		t.Errorf("events %d", len(rec.Events))
	}
	// Done: the next sync does nothing.
	if errs := env.m.SetUp(ctx, pod); len(errs) != 0 || len(env.csi.callsWith("expand")) != 1 {
		t.Errorf("second expansion: %v %v", errs, env.csi.callsWith("expand"))
	}
}

// A raw block volume is expanded as the kubelet expands it: by its published device file and its block
// staging path, with a block capability (a filesystem mount path does not exist for it).
func TestPublishedBlockVolumeIsExpandedByItsDeviceFile(t *testing.T) {
	env := newCSIEnv(t, storagev1.CSIDriverSpec{AttachRequired: ptr.To(false)})
	env.csi.caps[csipb.NodeServiceCapability_RPC_EXPAND_VOLUME] = true
	env.m.ClaimStatus = &fakeClaimStatus{objects: env.objects}
	env.bindCSIClaim("vol-1")
	block := corev1.PersistentVolumeBlock
	pv := env.objects.pvs["pv-vol-1"]
	pv.Spec.VolumeMode = &block
	pv.Spec.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")}
	claim := env.objects.claims["ns/data"]
	claim.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}
	claim.Status.AllocatedResourceStatuses = map[corev1.ResourceName]corev1.ClaimResourceStatus{
		corev1.ResourceStorage: corev1.PersistentVolumeClaimNodeResizePending}
	pod := newPod(claimVolume("data", "data", false))
	pod.Spec.EphemeralContainers = nil
	pod.Spec.Containers[0].VolumeDevices = []corev1.VolumeDevice{{Name: "data", DevicePath: "/dev/xvda"}}
	for range 2 { // mapped, then expanded at the next sync
		if errs := env.m.SetUp(context.Background(), pod); len(errs) != 0 {
			t.Fatal(errs)
		}
	}
	base := filepath.Join(env.m.RootDir, "plugins/kubernetes.io/csi/volumeDevices")
	if len(env.csi.expandReqs) != 1 {
		t.Fatalf("expand calls %v", env.csi.callsWith("expand"))
	}
	req := env.csi.expandReqs[0]
	if req.VolumePath != filepath.Join(base, "publish/pv-vol-1/uid-1") || req.StagingTargetPath != filepath.Join(base, "staging/pv-vol-1") ||
		req.VolumeCapability.GetBlock() == nil {
		t.Errorf("expand request path %s staging %s capability %v; want the published device, the block staging path, block",
			req.VolumePath, req.StagingTargetPath, req.VolumeCapability)
	}
	if c := env.objects.claims["ns/data"].Status.Capacity[corev1.ResourceStorage]; c.String() != "2Gi" {
		t.Errorf("claim capacity %s after the expansion, want 2Gi", c.String())
	}
}

func TestFailedNodeExpansionIsWrittenOnTheClaim(t *testing.T) {
	env, _, claim, pod := expandingEnv(t)
	env.csi.expandErr = grpcstatus.Error(codes.OutOfRange, "too big")
	ctx := context.Background()
	env.objects.pvs["pv-vol-1"].Spec.Capacity[corev1.ResourceStorage] = resource.MustParse("9Ei")
	claim.Status.AllocatedResourceStatuses = map[corev1.ResourceName]corev1.ClaimResourceStatus{
		corev1.ResourceStorage: corev1.PersistentVolumeClaimNodeResizePending}
	if errs := env.m.SetUp(ctx, pod); len(errs) != 0 {
		t.Fatalf("a failed expansion must not fail the running pod's volumes: %v", errs)
	}
	st := env.objects.claims["ns/data"].Status
	if st.AllocatedResourceStatuses[corev1.ResourceStorage] != corev1.PersistentVolumeClaimNodeResizeInfeasible ||
		len(st.Conditions) != 1 || st.Conditions[0].Type != corev1.PersistentVolumeClaimNodeResizeError ||
		!strings.Contains(st.Conditions[0].Message, "failed to expand pvc with rpc error: code = OutOfRange desc = too big") {
		t.Errorf("claim status %+v", st)
	}
}

// TestCSIBlockVolumeIsMappedAsTheKubeletMapsIt: staged and published as a block device at the kubelet's
// paths, bind-mounted at the global map path, linked from the pod's device map path, given to the
// container as a device; torn down in reverse.
func TestCSIBlockVolumeIsMappedAsTheKubeletMapsIt(t *testing.T) {
	env := newCSIEnv(t, storagev1.CSIDriverSpec{AttachRequired: ptr.To(false)})
	env.bindCSIClaim("vol-1")
	block := corev1.PersistentVolumeBlock
	env.objects.pvs["pv-vol-1"].Spec.VolumeMode = &block
	pod := newPod(claimVolume("data", "data", false))
	pod.Spec.EphemeralContainers = nil
	pod.Spec.Containers[0].VolumeDevices = []corev1.VolumeDevice{{Name: "data", DevicePath: "/dev/xvda"}}
	ctx := context.Background()
	if errs := env.m.SetUp(ctx, pod); len(errs) != 0 {
		t.Fatal(errs)
	}
	base := filepath.Join(env.m.RootDir, "plugins/kubernetes.io/csi/volumeDevices")
	publish := filepath.Join(base, "publish/pv-vol-1/uid-1")
	if got := env.csi.callsWith(""); len(got) != 2 || got[0] != "stage vol-1 "+filepath.Join(base, "staging/pv-vol-1") || got[1] != "publish vol-1 "+publish {
		t.Fatalf("driver calls %v", got)
	}
	if env.csi.pubReqs[0].VolumeCapability.GetBlock() == nil {
		t.Errorf("publish capability %v, want block", env.csi.pubReqs[0].VolumeCapability)
	}
	globalMap := filepath.Join(base, "pv-vol-1/dev/uid-1")
	if got := env.mounter.mounted[globalMap]; got != "bind "+publish {
		t.Errorf("global map path %s holds %q", globalMap, got)
	}
	if !env.mounter.loops[globalMap] {
		t.Errorf("no loop device holds the global map path %s open", globalMap)
	}
	link := filepath.Join(env.m.RootDir, "pods/uid-1/volumeDevices/kubernetes.io~csi/pv-vol-1")
	if dest, err := os.Readlink(link); err != nil || dest != publish {
		t.Errorf("pod device link %s → %s (%v), want %s", link, dest, err, publish)
	}
	if d := readVolData(t, filepath.Join(base, "pv-vol-1/data")); d["volumeHandle"] != "vol-1" || d["specVolID"] != "pv-vol-1" {
		t.Errorf("vol_data.json %v", d)
	}
	devs, err := env.m.Devices(pod, &pod.Spec.Containers[0])
	if err != nil || len(devs) != 1 || devs[0].HostPath != link || devs[0].ContainerPath != "/dev/xvda" || devs[0].Permissions != "mrw" {
		t.Fatalf("devices %v (%v)", devs, err)
	}
	// Synced again: nothing called again.
	if errs := env.m.SetUp(ctx, pod); len(errs) != 0 || len(env.csi.callsWith("")) != 2 {
		t.Fatalf("second SetUp: %v %v", errs, env.csi.callsWith(""))
	}
	if err := env.m.TearDown(ctx, pod.UID); err != nil {
		t.Fatal(err)
	}
	if got := env.csi.callsWith("un"); len(got) != 2 || got[0] != "unpublish vol-1 "+publish || !strings.HasPrefix(got[1], "unstage vol-1 ") {
		t.Errorf("teardown calls %v", got)
	}
	if _, ok := env.mounter.mounted[globalMap]; ok {
		t.Error("global map path still mounted")
	}
	// The loop device goes before the mount it holds open.
	if calls := env.mounter.callsWith(""); !slices.Contains(calls, "loop-detach "+globalMap) ||
		slices.Index(calls, "loop-detach "+globalMap) > slices.Index(calls, "unmount "+globalMap) || len(env.mounter.loops) != 0 {
		t.Errorf("mount calls %v, loop devices left %v: want the global map path's loop device detached, then the path unmounted", calls, env.mounter.loops)
	}
	for _, p := range []string{link, filepath.Join(base, "pv-vol-1"), filepath.Join(base, "staging/pv-vol-1"), filepath.Join(base, "publish/pv-vol-1")} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s left (%v)", p, err)
		}
	}
}

// A driver's failure reads as the kubelet's event: the operation, the volume, the driver's gRPC status.
func TestCSIFailuresReadAsTheKubeletsEvents(t *testing.T) {
	env := newCSIEnv(t, storagev1.CSIDriverSpec{AttachRequired: ptr.To(false)})
	env.bindCSIClaim("vol-1")
	env.csi.stageErr = grpcstatus.Error(codes.Internal, "no space")
	errs := env.m.SetUp(context.Background(), csiPod("uid-1"))
	if want := `MountVolume.MountDevice failed for volume "pv-vol-1" : rpc error: code = Internal desc = no space`; len(errs) != 1 || errs[0].Error() != want {
		t.Errorf("stage failure %v, want %q", errs, want)
	}
	env.csi.stageErr = nil
	env.csi.publishErr = grpcstatus.Error(codes.NotFound, "gone")
	errs = env.m.SetUp(context.Background(), csiPod("uid-1"))
	if want := `MountVolume.SetUp failed for volume "pv-vol-1" : rpc error: code = NotFound desc = gone`; len(errs) != 1 || errs[0].Error() != want {
		t.Errorf("publish failure %v, want %q", errs, want)
	}
}

// A volume whose only access mode is ReadWriteOncePod is not set up for a second pod on the node while the first
// has it (the kubelet's FailedMount message); once the first pod's volumes are torn down, the second gets it.
func TestReadWriteOncePodVolumeIsRefusedToASecondPod(t *testing.T) {
	env := newCSIEnv(t, storagev1.CSIDriverSpec{AttachRequired: ptr.To(false)})
	env.bindCSIClaim("vol-1")
	env.objects.pvs["pv-vol-1"].Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod}
	ctx := context.Background()
	first, second := csiPod("uid-1"), csiPod("uid-2")
	if errs := env.m.SetUp(ctx, first); len(errs) != 0 {
		t.Fatal(errs)
	}
	errs := env.m.SetUp(ctx, second)
	want := `MountVolume.SetUp failed for volume "pv-vol-1" : volume uses the ReadWriteOncePod access mode and is already in use by another pod`
	if len(errs) != 1 || errs[0].Error() != want {
		t.Fatalf("second pod's set-up: %v, want %q", errs, want)
	}
	if env.m.Ready(second.UID) {
		t.Error("the second pod is ready")
	}
	if got := env.csi.callsWith("publish"); len(got) != 1 {
		t.Errorf("publish calls %v, want the first pod's only", got)
	}
	if err := env.m.TearDown(ctx, first.UID); err != nil {
		t.Fatal(err)
	}
	if errs := env.m.SetUp(ctx, second); len(errs) != 0 || !env.m.Ready(second.UID) {
		t.Fatalf("after the first pod's teardown: %v", errs)
	}
	// Another access mode beside ReadWriteOncePod: not checked, as the kubelet does not.
	env.objects.pvs["pv-vol-1"].Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod, corev1.ReadWriteOnce}
	if errs := env.m.SetUp(ctx, csiPod("uid-3")); len(errs) != 0 {
		t.Errorf("with two access modes: %v", errs)
	}
}

// Recovery from a failed expansion, as the kubelet's node expander: a final error (not infeasible) leaves the claim
// NodeResizeInProgress with a NodeResizeError condition; the user lowers the claim and the resizer allocates less,
// and the node expands to the allocated size, not the volume's larger capacity. Had the resizer kept the larger
// allocation, the claim asking for another size, a second final failure makes the claim NodeResizeInfeasible.
func TestNodeExpansionRecoversToTheAllocatedSize(t *testing.T) {
	for _, resizerLowered := range []bool{true, false} {
		env, _, claim, pod := expandingEnv(t)
		ctx := context.Background()
		env.objects.pvs["pv-vol-1"].Spec.Capacity[corev1.ResourceStorage] = resource.MustParse("9Gi")
		want := func(requested, allocated string) {
			claim.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(requested)}
			claim.Status.AllocatedResources = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(allocated)}
			claim.Status.AllocatedResourceStatuses = map[corev1.ResourceName]corev1.ClaimResourceStatus{
				corev1.ResourceStorage: corev1.PersistentVolumeClaimNodeResizePending}
		}
		want("9Gi", "9Gi")
		env.csi.expandErr = grpcstatus.Error(codes.PermissionDenied, "permission denied for expansion")
		if errs := env.m.SetUp(ctx, pod); len(errs) != 0 {
			t.Fatal(errs)
		}
		st := env.objects.claims["ns/data"].Status
		if st.AllocatedResourceStatuses[corev1.ResourceStorage] != corev1.PersistentVolumeClaimNodeResizeInProgress ||
			len(st.Conditions) != 1 || st.Conditions[0].Type != corev1.PersistentVolumeClaimNodeResizeError {
			t.Fatalf("after a final error: claim status %+v, want NodeResizeInProgress with NodeResizeError", st)
		}
		if !resizerLowered {
			want("5Gi", "9Gi")
			if errs := env.m.SetUp(ctx, pod); len(errs) != 0 {
				t.Fatal(errs)
			}
			if st := env.objects.claims["ns/data"].Status; st.AllocatedResourceStatuses[corev1.ResourceStorage] != corev1.PersistentVolumeClaimNodeResizeInfeasible {
				t.Errorf("a second final failure for another size: claim status %+v, want NodeResizeInfeasible", st)
			}
			continue
		}
		want("5Gi", "5Gi")
		env.csi.expandErr = nil
		if errs := env.m.SetUp(ctx, pod); len(errs) != 0 {
			t.Fatal(errs)
		}
		if got := env.csi.expandReqs[len(env.csi.expandReqs)-1].CapacityRange.RequiredBytes; got != 5<<30 {
			t.Errorf("recovery expanded to %d bytes, want the allocated 5Gi", got)
		}
		st = env.objects.claims["ns/data"].Status
		if c := st.Capacity[corev1.ResourceStorage]; c.String() != "5Gi" || st.AllocatedResourceStatuses != nil || len(st.Conditions) != 0 {
			t.Errorf("after the recovery: claim status %+v, want 5Gi and no resize status or condition", st)
		}
	}
}
