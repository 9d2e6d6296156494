package volumes

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func fieldItem(path, field string) corev1.DownwardAPIVolumeFile {
	return corev1.DownwardAPIVolumeFile{Path: path, FieldRef: &corev1.ObjectFieldSelector{FieldPath: field}}
}

func resourceItem(path, container, res, divisor string) corev1.DownwardAPIVolumeFile {
	sel := &corev1.ResourceFieldSelector{ContainerName: container, Resource: res}
	if divisor != "" {
		sel.Divisor = resource.MustParse(divisor)
	}
	return corev1.DownwardAPIVolumeFile{Path: path, ResourceFieldRef: sel}
}

func TestDownwardAPIVolume(t *testing.T) {
	tests := []struct {
		name    string
		item    corev1.DownwardAPIVolumeFile
		want    string
		wantErr string
	}{
		{name: "name", item: fieldItem("name", "metadata.name"), want: "web"},
		{name: "namespace", item: fieldItem("ns", "metadata.namespace"), want: "ns"},
		{name: "uid", item: fieldItem("uid", "metadata.uid"), want: "uid-1"},
		{name: "labels", item: fieldItem("labels", "metadata.labels"), want: "app=\"web\"\ntier=\"front \\\"end\\\"\""},
		{name: "annotations", item: fieldItem("annotations", "metadata.annotations"), want: "a.io/b=\"multi\\nline\"\nz=\"last\""},
		{name: "one label", item: fieldItem("app", "metadata.labels['app']"), want: "web"},
		{name: "one annotation", item: fieldItem("z", "metadata.annotations['z']"), want: "last"},
		{name: "missing label", item: fieldItem("none", "metadata.labels['none']"), want: ""},
		{name: "unsupported field", item: fieldItem("node", "spec.nodeName"), wantErr: "unsupported fieldPath: spec.nodeName"},
		{name: "cpu limit in millicores", item: resourceItem("cpu", "c", "limits.cpu", "1m"), want: "500"},
		{name: "cpu limit rounded up to cores", item: resourceItem("cpu", "c", "limits.cpu", ""), want: "1"},
		{name: "memory request in Mi", item: resourceItem("mem", "c", "requests.memory", "1Mi"), want: "64"},
		{name: "memory limit defaults to allocatable", item: resourceItem("mem", "c", "limits.memory", "1Gi"), want: "4"},
		{name: "init container", item: resourceItem("mem", "init", "requests.memory", "1"), want: "1024"},
		{name: "unknown container", item: resourceItem("x", "nope", "limits.cpu", ""), wantErr: "container nope not found"},
		{name: "unsupported resource", item: resourceItem("x", "c", "limits.gpu", ""), wantErr: "unsupported container resource : limits.gpu"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := newTestEnv(t)
			env.m.NodeAllocatable = func() corev1.ResourceList {
				return corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("4Gi"), corev1.ResourceCPU: resource.MustParse("8")}
			}
			pod := downwardPod(vol("info", corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{tt.item}}}))
			errs := env.m.SetUp(context.Background(), pod)
			if tt.wantErr != "" {
				if len(errs) != 1 || !strings.HasSuffix(errs[0].Error(), tt.wantErr) {
					t.Fatalf("errors = %v, want %q", errs, tt.wantErr)
				}
				return
			}
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			dir := must(env.m.volumeDir(pod.UID, pluginDownwardAPI, "info"))
			got := readVolume(t, dir)
			if want := map[string]string{tt.item.Path: tt.want}; !reflect.DeepEqual(got, want) {
				t.Errorf("files = %q, want %q", got, want)
			}
			if calls := env.mounter.callsWith("tmpfs " + dir); len(calls) != 1 {
				t.Errorf("downwardAPI volume not on tmpfs: %v", calls)
			}
		})
	}
}

func downwardPod(vols ...corev1.Volume) *corev1.Pod {
	pod := newPod(vols...)
	pod.Labels = map[string]string{"tier": `front "end"`, "app": "web"}
	pod.Annotations = map[string]string{"z": "last", "a.io/b": "multi\nline"}
	pod.Spec.Containers[0].Resources = corev1.ResourceRequirements{
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")},
		Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
	}
	pod.Spec.InitContainers = []corev1.Container{{Name: "init", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Ki")},
	}}}
	return pod
}

// TestDownwardAPIFollowsLabels: a label change reaches the volume at the next sync.
func TestDownwardAPIFollowsLabels(t *testing.T) {
	env := newTestEnv(t)
	pod := downwardPod(vol("info", corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{
		DefaultMode: ptrTo[int32](0o400),
		Items:       []corev1.DownwardAPIVolumeFile{fieldItem("labels", "metadata.labels"), fieldItem("meta/name", "metadata.name")},
	}}))
	mustSetUp(t, env.m, pod)
	pod.Labels = map[string]string{"app": "web", "version": "2"}
	mustSetUp(t, env.m, pod)
	dir := must(env.m.volumeDir(pod.UID, pluginDownwardAPI, "info"))
	want := map[string]string{"labels": "app=\"web\"\nversion=\"2\"", "meta/name": "web"}
	if got := readVolume(t, dir); !reflect.DeepEqual(got, want) {
		t.Errorf("files = %q, want %q", got, want)
	}
	if got := modeOf(t, filepath.Join(dir, "labels")).Perm(); got != 0o400 {
		t.Errorf("mode = %v, want 0400", got)
	}
}

// upstreamDownwardItems are the items of every pod of the upstream "Downward API volume" and "Projected
// downwardAPI" specs (downwardAPIVolumeBasePod): the pod name and four resources of client-container.
func upstreamDownwardItems() []corev1.DownwardAPIVolumeFile {
	return []corev1.DownwardAPIVolumeFile{
		{Path: "podname", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}},
		resourceItem("cpu_limit", "client-container", "limits.cpu", ""),
		resourceItem("cpu_request", "client-container", "requests.cpu", ""),
		resourceItem("memory_limit", "client-container", "limits.memory", ""),
		resourceItem("memory_request", "client-container", "requests.memory", ""),
	}
}

// downwardKind builds a volume of one kind (downwardAPI, or projected with a downwardAPI source) and
// says where the manager writes it.
type downwardKind struct {
	name   string
	plugin string
	source func(items []corev1.DownwardAPIVolumeFile, defaultMode *int32) corev1.VolumeSource
}

var downwardKinds = []downwardKind{
	{name: "downwardAPI", plugin: pluginDownwardAPI, source: func(items []corev1.DownwardAPIVolumeFile, mode *int32) corev1.VolumeSource {
		return corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: items, DefaultMode: mode}}
	}},
	{name: "projected", plugin: pluginProjected, source: func(items []corev1.DownwardAPIVolumeFile, mode *int32) corev1.VolumeSource {
		return corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{DefaultMode: mode,
			Sources: []corev1.VolumeProjection{{DownwardAPI: &corev1.DownwardAPIProjection{Items: items}}}}}
	}},
}

// upstreamPod is the specs' pod: one container, client-container, with the given resources.
func upstreamPod(src corev1.VolumeSource, res corev1.ResourceRequirements) *corev1.Pod {
	pod := newPod(vol("podinfo", src))
	pod.Name = "downwardapi-volume-1"
	pod.Spec.Containers = []corev1.Container{{Name: "client-container", Resources: res,
		VolumeMounts: []corev1.VolumeMount{{Name: "podinfo", MountPath: "/etc/podinfo"}}}}
	return pod
}

func withAllocatable(env *testEnv) *testEnv {
	env.m.NodeAllocatable = func() corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi")}
	}
	return env
}

// TestDownwardAPIUpstreamSpecs: the files the upstream specs read, for a container with requests and
// limits ("should provide container's cpu limit" ...) and for one without any ("should provide podname
// only", "should provide node allocatable (cpu) as default cpu limit if the limit is not set" ...): its
// unset requests read as 0 and its limits as the node's allocatable, and the volume is set up.
func TestDownwardAPIUpstreamSpecs(t *testing.T) {
	withResources := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1250m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
	}
	tests := []struct {
		name string
		res  corev1.ResourceRequirements
		want map[string]string
	}{
		{name: "container resources", res: withResources, want: map[string]string{"podname": "downwardapi-volume-1",
			"cpu_limit": "2", "cpu_request": "1", "memory_limit": "134217728", "memory_request": "33554432"}},
		{name: "no container resources", want: map[string]string{"podname": "downwardapi-volume-1",
			"cpu_limit": "4", "cpu_request": "0", "memory_limit": "8589934592", "memory_request": "0"}},
	}
	for _, kind := range downwardKinds {
		for _, tt := range tests {
			t.Run(kind.name+"/"+tt.name, func(t *testing.T) {
				env := withAllocatable(newTestEnv(t))
				pod := upstreamPod(kind.source(upstreamDownwardItems(), nil), tt.res)
				mustSetUp(t, env.m, pod)
				if !env.m.Ready(pod.UID) {
					t.Fatal("volume not ready")
				}
				dir := must(env.m.volumeDir(pod.UID, kind.plugin, "podinfo"))
				if got := readVolume(t, dir); !reflect.DeepEqual(got, tt.want) {
					t.Errorf("files = %q, want %q", got, tt.want)
				}
			})
		}
	}
}

// TestDownwardAPIModesAndFSGroup: defaultMode and item mode set the file's mode; with fsGroup the files
// and directories belong to the group, a file keeps its mode with g+r added ("should provide podname as
// non-root with fsgroup and defaultMode": 0440 stays -r--r-----), and a non-root user in the group can
// reach and read it.
func TestDownwardAPIModesAndFSGroup(t *testing.T) {
	tests := []struct {
		name        string
		defaultMode *int32
		itemMode    *int32
		fsGroup     *int64
		want        os.FileMode
	}{
		{name: "API default 0644", want: 0o644},
		{name: "defaultMode 0400", defaultMode: ptrTo[int32](0o400), want: 0o400},
		{name: "item mode 0400", itemMode: ptrTo[int32](0o400), want: 0o400},
		{name: "item mode wins over defaultMode", defaultMode: ptrTo[int32](0o644), itemMode: ptrTo[int32](0o400), want: 0o400},
		{name: "fsGroup", fsGroup: ptrTo[int64](1234), want: 0o644},
		{name: "fsGroup and item mode 0440", itemMode: ptrTo[int32](0o440), fsGroup: ptrTo[int64](1234), want: 0o440},
		{name: "fsGroup adds g+r to 0400", defaultMode: ptrTo[int32](0o400), fsGroup: ptrTo[int64](1234), want: 0o440},
	}
	for _, kind := range downwardKinds {
		for _, tt := range tests {
			t.Run(kind.name+"/"+tt.name, func(t *testing.T) {
				env := withAllocatable(newTestEnv(t))
				items := upstreamDownwardItems()
				items[0].Mode = tt.itemMode
				pod := upstreamPod(kind.source(items, tt.defaultMode), corev1.ResourceRequirements{})
				if tt.fsGroup != nil {
					pod.Spec.SecurityContext = &corev1.PodSecurityContext{FSGroup: tt.fsGroup, RunAsUser: ptrTo[int64](1000)}
				}
				mustSetUp(t, env.m, pod)
				dir := must(env.m.volumeDir(pod.UID, kind.plugin, "podinfo"))
				file := filepath.Join(dir, "podname")
				if got := modeOf(t, file); got != tt.want {
					t.Errorf("mode of podname = %v, want %v", got, tt.want)
				}
				if tt.fsGroup == nil {
					return
				}
				if gid := gidOf(t, file); int64(gid) != *tt.fsGroup {
					t.Errorf("gid of podname = %d, want %d", gid, *tt.fsGroup)
				}
				if err := readableBy(dir, file, 1000, uint32(*tt.fsGroup)); err != nil {
					t.Error(err)
				}
			})
		}
	}
}

// readableBy checks, as the kernel would for a process of uid with supplementary group gid, that every
// directory from the volume root down to file's target can be searched and the target read.
func readableBy(root, file string, uid, gid uint32) error {
	target, err := filepath.EvalSymlinks(file)
	if err != nil {
		return err
	}
	rel, err := filepath.Rel(root, target)
	if err != nil {
		return err
	}
	path := root
	for _, part := range strings.Split(filepath.Dir(rel), string(os.PathSeparator)) {
		if err := permits(path, uid, gid, 0o1); err != nil {
			return err
		}
		path = filepath.Join(path, part)
	}
	if err := permits(path, uid, gid, 0o1); err != nil {
		return err
	}
	return permits(target, uid, gid, 0o4)
}

// permits checks one permission bit (4 read, 1 search) of path for uid/gid.
func permits(path string, uid, gid uint32, bit os.FileMode) error {
	info, err := os.Stat(path)
	if err != nil {
		return err
	}
	st := info.Sys().(*syscall.Stat_t)
	perm := info.Mode().Perm()
	switch {
	case st.Uid == uid:
		perm >>= 6
	case st.Gid == gid:
		perm >>= 3
	}
	if perm&bit == 0 {
		return fmt.Errorf("%s (mode %v, uid %d, gid %d) denies uid %d gid %d", path, info.Mode(), st.Uid, st.Gid, uid, gid)
	}
	return nil
}

// TestDownwardAPIFollowsMetadata: a label or annotation change of a running pod reaches the volume at
// the next SetUp ("should update labels on modification", "should update annotations on
// modification"), for both kinds of volume.
func TestDownwardAPIFollowsMetadata(t *testing.T) {
	for _, kind := range downwardKinds {
		t.Run(kind.name, func(t *testing.T) {
			env := withAllocatable(newTestEnv(t))
			items := append(upstreamDownwardItems(), fieldItem("labels", "metadata.labels"), fieldItem("annotations", "metadata.annotations"))
			pod := upstreamPod(kind.source(items, nil), corev1.ResourceRequirements{})
			pod.Labels = map[string]string{"key1": "value1", "key2": "value2"}
			pod.Annotations = map[string]string{"builder": "bar"}
			mustSetUp(t, env.m, pod)
			dir := must(env.m.volumeDir(pod.UID, kind.plugin, "podinfo"))

			updated := pod.DeepCopy()
			updated.Labels["key3"] = "value3"
			updated.Annotations["builder"] = "foo"
			mustSetUp(t, env.m, updated)
			got := readVolume(t, dir)
			if want := "key1=\"value1\"\nkey2=\"value2\"\nkey3=\"value3\""; got["labels"] != want {
				t.Errorf("labels = %q, want %q", got["labels"], want)
			}
			if want := "builder=\"foo\""; got["annotations"] != want {
				t.Errorf("annotations = %q, want %q", got["annotations"], want)
			}
		})
	}
}
