package podrules

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func rl(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func sel(container, res, divisor string) *corev1.ResourceFieldSelector {
	s := &corev1.ResourceFieldSelector{ContainerName: container, Resource: res}
	if divisor != "" {
		s.Divisor = resource.MustParse(divisor)
	}
	return s
}

// resourcePod has the containers of the upstream downward API specs and one of each other kind.
//
//	client-container  requests cpu 250m, memory 32Mi; limits cpu 1250m, memory 128Mi
//	bare              no resources
//	zero              limits cpu 0, memory 0
//	big               requests ephemeral-storage 1Gi+1, hugepages-2Mi 4Mi; limits hugepages-2Mi 4Mi
//	init              init container, no resources
//	sidecar           init container with restartPolicy Always, requests cpu 100m
//	debug             ephemeral container
func resourcePod() *corev1.Pod {
	always := corev1.ContainerRestartPolicyAlways
	return &corev1.Pod{Spec: corev1.PodSpec{
		Containers: []corev1.Container{
			{Name: "client-container", Resources: corev1.ResourceRequirements{
				Requests: rl("cpu", "250m", "memory", "32Mi"),
				Limits:   rl("cpu", "1250m", "memory", "128Mi"),
			}},
			{Name: "bare"},
			{Name: "zero", Resources: corev1.ResourceRequirements{Limits: rl("cpu", "0", "memory", "0")}},
			{Name: "big", Resources: corev1.ResourceRequirements{
				Requests: rl("ephemeral-storage", "1073741825", "hugepages-2Mi", "4Mi"),
				Limits:   rl("hugepages-2Mi", "4Mi"),
			}},
		},
		InitContainers: []corev1.Container{
			{Name: "init"},
			{Name: "sidecar", RestartPolicy: &always, Resources: corev1.ResourceRequirements{Requests: rl("cpu", "100m")}},
		},
		EphemeralContainers: []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug"}}},
	}}
}

func allocatable() corev1.ResourceList {
	return rl("cpu", "4", "memory", "8Gi", "ephemeral-storage", "100Gi", "hugepages-2Mi", "1Gi")
}

func TestVolumeResourceValue(t *testing.T) {
	tests := []struct {
		name    string
		ref     *corev1.ResourceFieldSelector
		alloc   corev1.ResourceList
		want    string
		wantErr string
	}{
		// The values the upstream "Downward API volume" and "Projected downwardAPI" specs expect.
		{name: "cpu limit rounds up to whole cores", ref: sel("client-container", "limits.cpu", ""), want: "2"},
		{name: "cpu request rounds up to whole cores", ref: sel("client-container", "requests.cpu", ""), want: "1"},
		{name: "memory limit in bytes", ref: sel("client-container", "limits.memory", ""), want: "134217728"},
		{name: "memory request in bytes", ref: sel("client-container", "requests.memory", ""), want: "33554432"},
		{name: "unset cpu limit is the node's allocatable", ref: sel("bare", "limits.cpu", ""), want: "4"},
		{name: "unset memory limit is the node's allocatable", ref: sel("bare", "limits.memory", ""), want: "8589934592"},
		// Requests are never defaulted: an unset one is 0, not an error.
		{name: "unset cpu request is 0", ref: sel("bare", "requests.cpu", ""), want: "0"},
		{name: "unset memory request is 0", ref: sel("bare", "requests.memory", ""), want: "0"},
		{name: "unset ephemeral-storage request is 0", ref: sel("bare", "requests.ephemeral-storage", ""), want: "0"},
		// Divisors.
		{name: "cpu in millicores", ref: sel("client-container", "limits.cpu", "1m"), want: "1250"},
		{name: "cpu divisor 1 is cores", ref: sel("client-container", "requests.cpu", "1"), want: "1"},
		{name: "cpu divisor 100m rounds up", ref: sel("client-container", "limits.cpu", "100m"), want: "13"},
		{name: "memory in Mi", ref: sel("client-container", "limits.memory", "1Mi"), want: "128"},
		{name: "memory in Gi rounds up", ref: sel("client-container", "requests.memory", "1Gi"), want: "1"},
		{name: "memory in k (decimal)", ref: sel("client-container", "requests.memory", "1k"), want: "33555"},
		{name: "allocatable memory in Gi", ref: sel("bare", "limits.memory", "1Gi"), want: "8"},
		{name: "ephemeral-storage request in Gi rounds up", ref: sel("big", "requests.ephemeral-storage", "1Gi"), want: "2"},
		{name: "unset ephemeral-storage limit is the node's allocatable", ref: sel("bare", "limits.ephemeral-storage", "1Gi"), want: "100"},
		// Zero limits count as unset.
		{name: "zero cpu limit is the node's allocatable", ref: sel("zero", "limits.cpu", "1m"), want: "4000"},
		{name: "zero memory limit is the node's allocatable", ref: sel("zero", "limits.memory", "1Mi"), want: "8192"},
		// Hugepages.
		{name: "hugepages request", ref: sel("big", "requests.hugepages-2Mi", "1Mi"), want: "4"},
		{name: "hugepages limit", ref: sel("big", "limits.hugepages-2Mi", ""), want: "4194304"},
		{name: "unset hugepages limit is not defaulted", ref: sel("bare", "limits.hugepages-2Mi", ""), want: "0"},
		// No allocatable known: unset limits read as 0.
		{name: "no allocatable known", ref: sel("bare", "limits.cpu", ""), alloc: corev1.ResourceList{}, want: "0"},
		{name: "allocatable without the resource", ref: sel("bare", "limits.memory", ""), alloc: rl("cpu", "2"), want: "0"},
		// Other kinds of containers: init containers and sidecars are defaulted too in volumes.
		{name: "init container's unset limit is the node's allocatable", ref: sel("init", "limits.cpu", ""), want: "4"},
		{name: "sidecar request", ref: sel("sidecar", "requests.cpu", "1m"), want: "100"},
		{name: "ephemeral container is not looked up", ref: sel("debug", "limits.cpu", ""), wantErr: "container debug not found"},
		{name: "unknown container", ref: sel("nope", "limits.cpu", ""), wantErr: "container nope not found"},
		// Unsupported resources keep the kubelet's message.
		{name: "extended resource", ref: sel("bare", "limits.nvidia.com/gpu", ""), wantErr: "unsupported container resource : limits.nvidia.com/gpu"},
		{name: "pods", ref: sel("bare", "requests.pods", ""), wantErr: "unsupported container resource : requests.pods"},
		{name: "no kind", ref: sel("bare", "cpu", ""), wantErr: "unsupported container resource : cpu"},
		{name: "unknown kind", ref: sel("bare", "claims.cpu", ""), wantErr: "unsupported container resource : claims.cpu"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			alloc := allocatable()
			if tt.alloc != nil {
				alloc = tt.alloc
			}
			pod := resourcePod()
			before := pod.DeepCopy()
			got, err := VolumeResourceValue(pod, tt.ref, alloc)
			checkValue(t, got, err, tt.want, tt.wantErr)
			if pod.Spec.Containers[1].Resources.Limits != nil || before.Spec.Containers[0].Resources.Limits.Cpu().Cmp(*pod.Spec.Containers[0].Resources.Limits.Cpu()) != 0 {
				t.Errorf("the pod was modified")
			}
		})
	}
}

func TestEnvResourceValue(t *testing.T) {
	tests := []struct {
		name      string
		container string // the container whose environment is resolved
		podLimits corev1.ResourceList
		ref       *corev1.ResourceFieldSelector
		want      string
		wantErr   string
	}{
		{name: "own cpu limit", container: "client-container", ref: sel("", "limits.cpu", ""), want: "2"},
		{name: "own unset cpu limit is the node's allocatable", container: "bare", ref: sel("", "limits.cpu", ""), want: "4"},
		{name: "own unset request is 0", container: "bare", ref: sel("", "requests.memory", ""), want: "0"},
		{name: "another regular container's unset limit is defaulted", container: "client-container", ref: sel("bare", "limits.memory", "1Gi"), want: "8"},
		{name: "a named init container's unset limit is not defaulted", container: "client-container", ref: sel("init", "limits.cpu", ""), want: "0"},
		{name: "an init container's own unset limit is defaulted", container: "init", ref: sel("", "limits.cpu", ""), want: "4"},
		{name: "an init container naming itself is not defaulted", container: "init", ref: sel("init", "limits.cpu", ""), want: "0"},
		{name: "a sidecar's request", container: "bare", ref: sel("sidecar", "requests.cpu", "1m"), want: "100"},
		{name: "an ephemeral container's own unset limit is defaulted", container: "debug", ref: sel("", "limits.memory", "1Gi"), want: "8"},
		{name: "an ephemeral container cannot be named", container: "bare", ref: sel("debug", "limits.cpu", ""), wantErr: "container debug not found"},
		{name: "unknown container", container: "bare", ref: sel("nope", "limits.cpu", ""), wantErr: "container nope not found"},
		{name: "unsupported resource", container: "bare", ref: sel("", "limits.example.com/foo", ""), wantErr: "unsupported container resource : limits.example.com/foo"},
		// Pod-level limits stand in for the node's allocatable (PodLevelResources, on by default).
		{name: "pod-level memory limit", container: "bare", podLimits: rl("memory", "2Gi"), ref: sel("", "limits.memory", "1Gi"), want: "2"},
		{name: "pod-level limits leave other resources to the node", container: "bare", podLimits: rl("memory", "2Gi"), ref: sel("", "limits.cpu", ""), want: "4"},
		{name: "pod-level cpu limit for a named regular container", container: "client-container", podLimits: rl("cpu", "1500m"), ref: sel("bare", "limits.cpu", "1m"), want: "1500"},
		{name: "container limit wins over pod-level limit", container: "client-container", podLimits: rl("cpu", "3"), ref: sel("", "limits.cpu", "1m"), want: "1250"},
		{name: "zero pod-level limit is ignored", container: "bare", podLimits: rl("cpu", "0", "memory", "1Gi"), ref: sel("", "limits.cpu", ""), want: "4"},
		{name: "pod-level hugepages only: node's allocatable", container: "bare", podLimits: rl("hugepages-2Mi", "4Mi"), ref: sel("", "limits.memory", "1Gi"), want: "8"},
		{name: "pod-level ephemeral-storage is not a pod-level resource", container: "bare", podLimits: rl("memory", "1Gi", "ephemeral-storage", "1Gi"), ref: sel("", "limits.ephemeral-storage", "1Gi"), want: "100"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := resourcePod()
			if tt.podLimits != nil {
				pod.Spec.Resources = &corev1.ResourceRequirements{Limits: tt.podLimits}
			}
			c, _ := FindContainer(pod, tt.container)
			alloc := allocatable()
			got, err := EnvResourceValue(pod, c, tt.ref, alloc)
			checkValue(t, got, err, tt.want, tt.wantErr)
			if !alloc.Memory().Equal(resource.MustParse("8Gi")) || !alloc.Cpu().Equal(resource.MustParse("4")) {
				t.Errorf("allocatable was modified: %v", alloc)
			}
		})
	}
}

// TestVolumeResourceValueIgnoresPodLevelLimits: the kubelet's volume plugins default to the node's
// allocatable only.
func TestVolumeResourceValueIgnoresPodLevelLimits(t *testing.T) {
	pod := resourcePod()
	pod.Spec.Resources = &corev1.ResourceRequirements{Limits: rl("memory", "2Gi")}
	got, err := VolumeResourceValue(pod, sel("bare", "limits.memory", "1Gi"), allocatable())
	checkValue(t, got, err, "8", "")
}

func checkValue(t *testing.T, got string, err error, want, wantErr string) {
	t.Helper()
	if wantErr != "" {
		if err == nil || err.Error() != wantErr {
			t.Fatalf("got %q, %v; want error %q", got, err, wantErr)
		}
		return
	}
	if err != nil || got != want {
		t.Fatalf("got %q, %v; want %q", got, err, want)
	}
}

func TestPodLevelLimitsSet(t *testing.T) {
	tests := []struct {
		name string
		res  *corev1.ResourceRequirements
		want bool
	}{
		{name: "no pod-level resources", want: false},
		{name: "requests only", res: &corev1.ResourceRequirements{Requests: rl("cpu", "1")}, want: false},
		{name: "cpu limit", res: &corev1.ResourceRequirements{Limits: rl("cpu", "1")}, want: true},
		{name: "hugepages limit", res: &corev1.ResourceRequirements{Limits: rl("hugepages-1Gi", "1Gi")}, want: true},
		{name: "unsupported resource only", res: &corev1.ResourceRequirements{Limits: rl("ephemeral-storage", "1Gi")}, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &corev1.Pod{Spec: corev1.PodSpec{Resources: tt.res}}
			if got := PodLevelLimitsSet(pod); got != tt.want {
				t.Errorf("PodLevelLimitsSet = %v, want %v", got, tt.want)
			}
		})
	}
}
