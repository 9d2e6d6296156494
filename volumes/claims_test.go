package volumes

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func claimVolume(name, claim string, readOnly bool) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim, ReadOnly: readOnly}}}
}

// bindClaim stores a Bound claim ns/claim and the volume pvName bound to it, with the given source.
func (f *fakeObjects) bindClaim(ns, claim, pvName string, src corev1.PersistentVolumeSource) {
	f.mu.Lock()
	defer f.mu.Unlock()
	uid := types.UID("claim-uid-" + claim)
	f.claims[ns+"/"+claim] = &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: claim, UID: uid},
		Spec:       corev1.PersistentVolumeClaimSpec{VolumeName: pvName},
		Status:     corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound},
	}
	f.pvs[pvName] = &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: pvName},
		Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: src,
			ClaimRef: &corev1.ObjectReference{Namespace: ns, Name: claim, UID: uid}},
	}
}

func mountingPod(vol corev1.Volume) *corev1.Pod {
	pod := newPod(vol)
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: vol.Name, MountPath: "/data"}}
	return pod
}

func TestClaimNotUsableWaitsWithTheKubeletsMessage(t *testing.T) {
	deleting := metav1.Now()
	cases := []struct {
		name  string
		setup func(f *fakeObjects)
		want  string
	}{
		{"missing", func(*fakeObjects) {}, `error processing PVC ns/data: failed to fetch PVC from API server: persistentvolumeclaims "data" not found`},
		{"pending", func(f *fakeObjects) {
			f.claims["ns/data"] = &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "data"},
				Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending}}
		}, "error processing PVC ns/data: PVC is not bound"},
		{"lost", func(f *fakeObjects) {
			f.claims["ns/data"] = &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-1"}, Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimLost}}
		}, "error processing PVC ns/data: PVC is not bound"},
		{"being deleted", func(f *fakeObjects) {
			f.bindClaim("ns", "data", "pv-1", corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp"}})
			f.claims["ns/data"].DeletionTimestamp = &deleting
		}, "error processing PVC ns/data: PVC is being deleted"},
		{"volume of another claim", func(f *fakeObjects) {
			f.bindClaim("ns", "data", "pv-1", corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp"}})
			f.pvs["pv-1"].Spec.ClaimRef.UID = "other"
		}, "found PV object pv-1 but its pv.Spec.ClaimRef.UID other does not point to claim.UID claim-uid-data"},
		{"block volume mounted", func(f *fakeObjects) {
			f.bindClaim("ns", "data", "pv-1", corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp"}})
			block := corev1.PersistentVolumeBlock
			f.pvs["pv-1"].Spec.VolumeMode = &block
		}, "volume data has volumeMode Block, but is specified in volumeMounts"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t)
			tc.setup(env.objects)
			pod := mountingPod(claimVolume("data", "data", false))
			errs := env.m.SetUp(context.Background(), pod)
			if len(errs) != 1 {
				t.Fatalf("errors = %v, want one", errs)
			}
			var ce *ClaimError
			if !errors.As(errs[0], &ce) || ce.Volume != "data" {
				t.Fatalf("error %T %v, want a *ClaimError for volume data", errs[0], errs[0])
			}
			msg := errs[0].Error()
			if !strings.HasPrefix(msg, "Unable to attach or mount volumes: unmounted volumes=[data], unattached volumes=[], failed to process volumes=[data]: ") ||
				!strings.Contains(msg, tc.want) {
				t.Errorf("message %q, want the kubelet's with %q", msg, tc.want)
			}
			if env.m.Ready(pod.UID) {
				t.Error("pod ready with a claim that cannot be used")
			}
		})
	}
}

func TestClaimBoundLaterIsSetUpOnTheNextSync(t *testing.T) {
	env := newTestEnv(t)
	dir := t.TempDir()
	pod := mountingPod(claimVolume("data", "data", false))
	if errs := env.m.SetUp(context.Background(), pod); len(errs) != 1 {
		t.Fatalf("errors = %v, want the missing claim", errs)
	}
	env.objects.bindClaim("ns", "data", "pv-1", corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir}})
	if errs := env.m.SetUp(context.Background(), pod); len(errs) != 0 {
		t.Fatalf("errors = %v after the claim was bound", errs)
	}
	if !env.m.Ready(pod.UID) {
		t.Fatal("pod not ready once its claim is bound")
	}
	mounts, err := env.m.Mounts(pod, &pod.Spec.Containers[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(mounts) != 1 || mounts[0].HostPath != dir || mounts[0].Readonly {
		t.Errorf("mounts = %+v, want %s read-write", mounts, dir)
	}
	// Once set up, the volume stays with its claim: the claim is not read again on every sync.
	reads := env.objects.claimReads
	delete(env.objects.claims, "ns/data")
	if errs := env.m.SetUp(context.Background(), pod); len(errs) != 0 || env.objects.claimReads != reads {
		t.Errorf("errors %v, claim reads %d → %d: a set-up claim must not be read again", errs, reads, env.objects.claimReads)
	}
}

func TestHostPathVolumeOfAClaimChecksItsTypeAndMountsReadOnly(t *testing.T) {
	env := newTestEnv(t)
	dir := filepath.Join(t.TempDir(), "made")
	create := corev1.HostPathDirectoryOrCreate
	env.objects.bindClaim("ns", "data", "pv-1", corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir, Type: &create}})
	pod := mountingPod(claimVolume("data", "data", true))
	if errs := env.m.SetUp(context.Background(), pod); len(errs) != 0 {
		t.Fatal(errs)
	}
	if info, err := os.Stat(dir); err != nil || !info.IsDir() {
		t.Fatalf("DirectoryOrCreate did not create %s: %v", dir, err)
	}
	mounts, err := env.m.Mounts(pod, &pod.Spec.Containers[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	if mounts[0].HostPath != dir || !mounts[0].Readonly {
		t.Errorf("mount %+v, want %s read-only (readOnly claim)", mounts[0], dir)
	}
}

func TestLocalVolumeIsBindMountedIntoThePodAndTornDown(t *testing.T) {
	for _, readOnly := range []bool{false, true} {
		env := newTestEnv(t)
		disk := t.TempDir()
		env.objects.bindClaim("ns", "data", "local-pv", corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: disk}})
		pod := mountingPod(claimVolume("data", "data", readOnly))
		if errs := env.m.SetUp(context.Background(), pod); len(errs) != 0 {
			t.Fatal(errs)
		}
		dir := filepath.Join(env.m.RootDir, "pods", "uid-1", "volumes", "kubernetes.io~local-volume", "local-pv")
		if got := env.mounter.mounted[dir]; got != "bind "+disk {
			t.Fatalf("readOnly=%t: %s holds %q, want a bind mount of %s", readOnly, dir, got, disk)
		}
		if binds := env.mounter.callsWith("bind "); len(binds) != 1 || !strings.HasSuffix(binds[0], "ro="+map[bool]string{false: "false", true: "true"}[readOnly]) {
			t.Errorf("readOnly=%t: bind calls %v", readOnly, binds)
		}
		// A second sync does not mount it again.
		if errs := env.m.SetUp(context.Background(), pod); len(errs) != 0 || len(env.mounter.callsWith("bind ")) != 1 {
			t.Errorf("second SetUp: errors %v, bind calls %v", errs, env.mounter.callsWith("bind "))
		}
		mounts, err := env.m.Mounts(pod, &pod.Spec.Containers[0], nil)
		if err != nil {
			t.Fatal(err)
		}
		if mounts[0].HostPath != dir || mounts[0].Readonly != readOnly {
			t.Errorf("mount %+v, want %s readOnly=%t", mounts[0], dir, readOnly)
		}
		if err := env.m.TearDown(context.Background(), pod.UID); err != nil {
			t.Fatal(err)
		}
		if _, ok := env.mounter.mounted[dir]; ok {
			t.Errorf("%s still mounted after TearDown", dir)
		}
		if _, err := os.Stat(disk); err != nil {
			t.Errorf("the local volume's own directory must survive the pod: %v", err)
		}
	}
}

func TestLocalVolumeThatIsAFileIsRefused(t *testing.T) {
	env := newTestEnv(t)
	file := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	env.objects.bindClaim("ns", "data", "local-pv", corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: file}})
	errs := env.m.SetUp(context.Background(), mountingPod(claimVolume("data", "data", false)))
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), `MountVolume.SetUp failed for volume "local-pv" : only directory and block device are supported`) {
		t.Errorf("errors = %v", errs)
	}
}

func TestUnsupportedPersistentVolumeSays(t *testing.T) {
	env := newTestEnv(t)
	env.objects.bindClaim("ns", "data", "nfs-pv", corev1.PersistentVolumeSource{NFS: &corev1.NFSVolumeSource{Server: "s", Path: "/"}})
	errs := env.m.SetUp(context.Background(), mountingPod(claimVolume("data", "data", false)))
	if len(errs) != 1 || !errors.Is(errs[0], ErrUnsupportedVolume) || !strings.Contains(errs[0].Error(), `PersistentVolume nfs-pv of type "nfs"`) {
		t.Errorf("errors = %v", errs)
	}
}

// TestGenericEphemeralVolumeUsesTheClaimMadeForThePod: the claim <pod>-<volume>, and only if the pod
// controls it.
func TestGenericEphemeralVolumeUsesTheClaimMadeForThePod(t *testing.T) {
	env := newTestEnv(t)
	dir := t.TempDir()
	vol := corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{
		VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{}}}}
	pod := mountingPod(vol)
	env.objects.bindClaim("ns", "web-scratch", "pv-1", corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir}})

	errs := env.m.SetUp(context.Background(), pod)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "PVC ns/web-scratch was not created for pod ns/web (pod is not owner)") {
		t.Fatalf("errors %v, want the claim refused: the pod does not own it", errs)
	}
	env.objects.claims["ns/web-scratch"].OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod",
		Name: "web", UID: pod.UID, Controller: new(true)}}
	if errs := env.m.SetUp(context.Background(), pod); len(errs) != 0 {
		t.Fatalf("errors %v with the pod owning its claim", errs)
	}
	mounts, err := env.m.Mounts(pod, &pod.Spec.Containers[0], nil)
	if err != nil || mounts[0].HostPath != dir {
		t.Errorf("mounts %v (%v), want %s", mounts, err, dir)
	}
}

// TestLocalVolumeOnABlockDeviceIsFormattedMountedAndBound: a local volume on a block device in Filesystem
// mode is mounted once for the node (its filesystem made if it has none) and bound into each pod; the
// device is unmounted when its last pod goes.
func TestLocalVolumeOnABlockDeviceIsFormattedMountedAndBound(t *testing.T) {
	devs, _ := filepath.Glob("/dev/loop[0-9]*")
	if len(devs) == 0 {
		t.Skip("no block device to point a local volume at")
	}
	env := newTestEnv(t)
	env.objects.bindClaim("ns", "data", "blockfs-pv", corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: devs[0]}})
	pod := mountingPod(claimVolume("data", "data", false))
	if errs := env.m.SetUp(context.Background(), pod); len(errs) != 0 {
		t.Fatal(errs)
	}
	global := filepath.Join(env.m.RootDir, "plugins/kubernetes.io/local-volume/mounts/blockfs-pv")
	if got := env.mounter.callsWith("format-and-mount"); len(got) != 1 || got[0] != "format-and-mount "+devs[0]+" "+global+" ext4 []" {
		t.Fatalf("device mounts %v", got)
	}
	dir := filepath.Join(env.m.RootDir, "pods/uid-1/volumes/kubernetes.io~local-volume/blockfs-pv")
	if got := env.mounter.mounted[dir]; got != "bind "+global {
		t.Fatalf("%s holds %q, want a bind mount of %s", dir, got, global)
	}
	if err := env.m.TearDown(context.Background(), pod.UID); err != nil {
		t.Fatal(err)
	}
	if _, ok := env.mounter.mounted[global]; ok {
		t.Error("device still mounted after its last pod went")
	}
}

// TestVolumeNoContainerUsesIsLeftAlone: as the kubelet, a volume in no container's volumeMounts or
// volumeDevices is neither resolved nor mounted, and does not hold the pod back.
func TestVolumeNoContainerUsesIsLeftAlone(t *testing.T) {
	env := newTestEnv(t)
	disk := t.TempDir()
	env.objects.bindClaim("ns", "data", "local-pv", corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: disk}})
	pod := newPod(claimVolume("data", "data", false), corev1.Volume{Name: "scratch"})
	pod.Spec.EphemeralContainers = nil
	if errs := env.m.SetUp(context.Background(), pod); len(errs) != 0 {
		t.Fatal(errs)
	}
	if !env.m.Ready(pod.UID) {
		t.Error("unused volumes hold the pod back")
	}
	if env.objects.claimReads != 0 || len(env.mounter.callsWith("")) != 0 {
		t.Errorf("unused volumes set up: %d claim reads, mounts %v", env.objects.claimReads, env.mounter.callsWith(""))
	}
	if _, err := os.Stat(filepath.Join(env.m.RootDir, "pods/uid-1/volumes")); !os.IsNotExist(err) {
		t.Errorf("volume directories made for unused volumes (%v)", err)
	}
}

// TestLocalBlockVolumeIsMappedAsTheKubeletMapsIt: a local volume in Block mode is bound at the kubelet's
// global map path (held open by a loop device) and linked from the pod's device map path; teardown
// releases the loop device, the bind mount and the folders, as it does for what the kubelet mapped before
// a takeover.
func TestLocalBlockVolumeIsMappedAsTheKubeletMapsIt(t *testing.T) {
	devs, _ := filepath.Glob("/dev/loop[0-9]*")
	if len(devs) == 0 {
		t.Skip("no block device to point a local volume at")
	}
	env := newTestEnv(t)
	env.objects.bindClaim("ns", "data", "block-pv", corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: devs[0]}})
	block := corev1.PersistentVolumeBlock
	env.objects.pvs["block-pv"].Spec.VolumeMode = &block
	pod := newPod(claimVolume("data", "data", false))
	pod.Spec.EphemeralContainers = nil
	pod.Spec.Containers[0].VolumeDevices = []corev1.VolumeDevice{{Name: "data", DevicePath: "/dev/xvda"}}
	if errs := env.m.SetUp(context.Background(), pod); len(errs) != 0 {
		t.Fatal(errs)
	}
	globalMap := filepath.Join(env.m.RootDir, "plugins/kubernetes.io~local-volume/volumeDevices/block-pv/uid-1")
	if got := env.mounter.mounted[globalMap]; got != "bind "+devs[0] {
		t.Errorf("global map path %s holds %q, want a bind mount of %s", globalMap, got, devs[0])
	}
	if !env.mounter.loops[globalMap] {
		t.Errorf("no loop device holds %s open", globalMap)
	}
	link := filepath.Join(env.m.RootDir, "pods/uid-1/volumeDevices/kubernetes.io~local-volume/block-pv")
	if dest, err := os.Readlink(link); err != nil || dest != devs[0] {
		t.Errorf("pod device link %s → %s (%v), want %s", link, dest, err, devs[0])
	}
	if err := env.m.TearDown(context.Background(), pod.UID); err != nil {
		t.Fatal(err)
	}
	if _, ok := env.mounter.mounted[globalMap]; ok || len(env.mounter.loops) != 0 {
		t.Errorf("after teardown: global map path mounted %v, loop devices %v", ok, env.mounter.loops)
	}
	for _, p := range []string{link, filepath.Dir(globalMap)} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s left (%v)", p, err)
		}
	}
}
