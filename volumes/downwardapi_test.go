package volumes

import (
	"context"
	"path/filepath"
	"reflect"
	"strings"
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
			dir := env.m.volumeDir(pod.UID, pluginDownwardAPI, "info")
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
	dir := env.m.volumeDir(pod.UID, pluginDownwardAPI, "info")
	want := map[string]string{"labels": "app=\"web\"\nversion=\"2\"", "meta/name": "web"}
	if got := readVolume(t, dir); !reflect.DeepEqual(got, want) {
		t.Errorf("files = %q, want %q", got, want)
	}
	if got := modeOf(t, filepath.Join(dir, "labels")).Perm(); got != 0o400 {
		t.Errorf("mode = %v, want 0400", got)
	}
}
