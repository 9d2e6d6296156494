package podconfig

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/runtime"
)

// debugPod is testPod with an ephemeral container "debugger" (kubectl debug --target=app).
func debugPod(mutate func(*corev1.Pod)) (*corev1.Pod, *corev1.Container) {
	pod := testPod()
	pod.Spec.EphemeralContainers = []corev1.EphemeralContainer{{
		EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debugger", Image: "busybox:1.36", Stdin: true, TTY: true},
		TargetContainerName:      "app",
	}}
	if mutate != nil {
		mutate(pod)
	}
	return pod, (*corev1.Container)(&pod.Spec.EphemeralContainers[0].EphemeralContainerCommon)
}

func TestEphemeralContainerProcessNamespace(t *testing.T) {
	tests := []struct {
		name     string
		mutate   func(*corev1.Pod)
		targetID string
		wantPid  runtimeapi.NamespaceMode
		wantID   string
	}{
		{name: "targets the container it debugs", targetID: "ctr-app", wantPid: runtimeapi.NamespaceMode_TARGET, wantID: "ctr-app"},
		{name: "no target: its own namespace", wantPid: runtimeapi.NamespaceMode_CONTAINER},
		{name: "pod shares its process namespace: no target needed",
			mutate: func(p *corev1.Pod) { p.Spec.ShareProcessNamespace = ptr.To(true) }, targetID: "ctr-app", wantPid: runtimeapi.NamespaceMode_POD},
		{name: "host PID namespace stays",
			mutate: func(p *corev1.Pod) { p.Spec.HostPID = true }, targetID: "ctr-app", wantPid: runtimeapi.NamespaceMode_NODE},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod, c := debugPod(tt.mutate)
			opts := containerOpts()
			opts.TargetContainerID = tt.targetID
			cfg, err := ContainerConfig(pod, c, runtime.KindEphemeral, 0, opts)
			if err != nil {
				t.Fatal(err)
			}
			ns := cfg.GetLinux().GetSecurityContext().GetNamespaceOptions()
			if ns.GetPid() != tt.wantPid || ns.GetTargetId() != tt.wantID {
				t.Errorf("pid namespace = %v/%q, want %v/%q", ns.GetPid(), ns.GetTargetId(), tt.wantPid, tt.wantID)
			}
			if !cfg.Stdin || !cfg.Tty {
				t.Errorf("stdin/tty = %v/%v, want both", cfg.Stdin, cfg.Tty)
			}
			if cfg.Labels[runtime.LabelContainerName] != "debugger" || cfg.Metadata.Name != "debugger" {
				t.Errorf("container named %q/%q, want debugger", cfg.Labels[runtime.LabelContainerName], cfg.Metadata.Name)
			}
		})
	}
}

// An agent restarted without the pod spec still tells an ephemeral container from a regular one.
func TestEphemeralKindRecordedInAnnotations(t *testing.T) {
	pod, c := debugPod(nil)
	a := ContainerAnnotations(pod, c, runtime.KindEphemeral, 0)
	st := runtime.DecodeContainerStatus(&runtimeapi.ContainerStatus{Id: "x", Metadata: &runtimeapi.ContainerMetadata{Name: c.Name}, Annotations: a}, "sb")
	if st.Kind != runtime.KindEphemeral {
		t.Errorf("kind = %v, want KindEphemeral", st.Kind)
	}
}
