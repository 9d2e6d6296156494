package podlifecycle

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// sidecar is an init container that keeps running (restartPolicy Always).
func sidecar(name string) corev1.Container {
	c := bedContainer(name)
	c.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
	return c
}

func withPreStopExec(c corev1.Container) corev1.Container {
	c.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"drain"}}}}
	return c
}

func containerNames(ids []string, byID map[string]string) []string {
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		out = append(out, byID[id])
	}
	return out
}

// A pod starts in the kubelet's order: the sandbox, then each init container once the one before it
// succeeded, a sidecar before the init containers after it (and kept running), and the app containers
// last, once every init container succeeded.
func TestStartOrderSandboxInitSidecarApp(t *testing.T) {
	b := newLifecycleBed(t)
	b.create(bedPod("web", func(p *corev1.Pod) {
		p.Spec.InitContainers = []corev1.Container{bedContainer("first"), sidecar("side"), bedContainer("second")}
	}))
	created := func() []string {
		var out []string
		for _, c := range b.containers("web") {
			out = append(out, c.Metadata.Name)
		}
		return out
	}
	expect := func(step string, want ...string) {
		t.Helper()
		if got := created(); !slices.Equal(got, want) {
			t.Fatalf("%s: containers %v, want %v", step, got, want)
		}
	}

	b.sync("web")
	expect("first sync", "first")
	b.sync("web")
	expect("first init container running", "first")
	b.exit("web", "first", 0)
	b.sync("web")
	expect("first init container done", "first", "side")
	b.sync("web")
	expect("sidecar running", "first", "side", "second")
	b.sync("web")
	expect("second init container running", "first", "side", "second")
	b.exit("web", "second", 0)
	b.sync("web")
	expect("initialized", "first", "side", "second", "app")
	b.mustRun("web", "side")
	b.mustRun("web", "app")

	want := []string{"RunPodSandbox",
		"CreateContainer", "StartContainer", // first
		"CreateContainer", "StartContainer", // side
		"CreateContainer", "StartContainer", // second
		"CreateContainer", "StartContainer"} // app
	if got := b.calls("RunPodSandbox", "CreateContainer", "StartContainer", "StopContainer"); !slices.Equal(got, want) {
		t.Errorf("CRI calls %v, want %v", got, want)
	}
	if st := b.pod("web").Status; st.Phase != corev1.PodRunning {
		t.Errorf("phase %s, want Running", st.Phase)
	}
}

// A deleted pod stops in the kubelet's order: the preStop hook runs before its container is stopped, the
// regular containers stop before the sidecars, the sidecars in reverse order of declaration; then the
// sandbox stops, and only then are the containers and the sandbox removed and the API object deleted.
func TestTerminationOrderPreStopRegularSidecarsSandbox(t *testing.T) {
	b := newLifecycleBed(t)
	b.create(bedPod("web", func(p *corev1.Pod) {
		p.Spec.InitContainers = []corev1.Container{sidecar("s1"), sidecar("s2")}
		p.Spec.Containers = []corev1.Container{withPreStopExec(bedContainer("app"))}
	}))
	for range 4 {
		b.sync("web")
	}
	byID := map[string]string{}
	for _, name := range []string{"s1", "s2", "app"} {
		byID[b.mustRun("web", name)] = name
	}
	b.rt.ResetCalls()

	b.deleteWithGrace("web", 30)
	b.sync("web")
	b.waitKill("web")
	if got, want := containerNames(b.rt.Exits(), byID), []string{"app", "s2", "s1"}; !slices.Equal(got, want) {
		t.Errorf("stop order %v, want %v", got, want)
	}
	if got, want := b.calls("ExecSync", "StopContainer"), []string{"ExecSync", "StopContainer", "StopContainer", "StopContainer"}; !slices.Equal(got, want) {
		t.Errorf("CRI calls %v, want the preStop hook (ExecSync) before any stop: %v", got, want)
	}

	b.rt.ResetCalls()
	b.sync("web")
	want := []string{"StopPodSandbox", "RemoveContainer", "RemoveContainer", "RemoveContainer", "RemovePodSandbox"}
	if got := b.calls("StopContainer", "StopPodSandbox", "RemoveContainer", "RemovePodSandbox"); !slices.Equal(got, want) {
		t.Errorf("CRI calls after the stop %v, want %v", got, want)
	}
	if p := b.pod("web"); p != nil {
		t.Errorf("pod still in the API: %v", p.Status.Phase)
	}
	if len(b.rt.Containers()) != 0 || len(b.rt.Sandboxes()) != 0 {
		t.Errorf("runtime still holds %d containers, %d sandboxes", len(b.rt.Containers()), len(b.rt.Sandboxes()))
	}
}
