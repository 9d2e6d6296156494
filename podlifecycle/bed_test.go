package podlifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/runtime/fake"
	"github.com/nodelet/nodelet/runtime/pleg"
	"github.com/nodelet/nodelet/runtime/podconfig"
)

// lifecycleBed is a Reconciler built by New over the in-memory runtime (runtime/fake, through the real
// CRI client), a PLEG and its pod state cache, and an in-memory API (bedAPI), on a fake clock that the
// test steps. Nothing runs by itself: the test calls Reconcile (sync, after a relist, as the PLEG's period
// would have brought one) and moves the clock, so what the reconciler did not do by a given
// instant is a fact, not a wall-clock window. Background work (stops, hooks) runs in goroutines; wait for
// it with waitKill.
type lifecycleBed struct {
	t    *testing.T
	ctx  context.Context
	clk  *clocktesting.FakeClock
	rt   *fake.Runtime
	cri  *runtime.Client
	api  *bedAPI
	rec  *record.FakeRecorder
	pleg *pleg.PLEG
	r    *Reconciler
	// logsDir is the pods' log directory (podLogsDir).
	logsDir string
	// vols is the volume manager the reconciler is built with (nil: none).
	vols Volumes
	// static is the static pod store the reconciler is built with (nil: none).
	static StaticPods
}

// useVolumes rebuilds the reconciler (an agent start) with the volume manager v.
func (b *lifecycleBed) useVolumes(v Volumes) {
	b.vols = v
	b.start()
}

const bedNode = "node-1"

func newLifecycleBed(t *testing.T) *lifecycleBed {
	t.Helper()
	// The clock starts at the wall clock's now: hook contexts carry deadlines computed on it.
	clk := clocktesting.NewFakeClock(time.Now().Truncate(time.Second))
	rt := fake.New(fake.WithClock(clk))
	rt.AddImage("docker.io/library/busybox:latest", 1<<20)
	dir, err := os.MkdirTemp("", "lc") // short: a unix socket path is at most 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	endpoint, err := rt.Start(filepath.Join(dir, "cri.sock"))
	if err != nil {
		t.Fatal(err)
	}
	cri, err := runtime.Dial(endpoint, runtime.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cri.Close()
		rt.Stop()
		_ = os.RemoveAll(dir)
	})
	b := &lifecycleBed{t: t, ctx: ctrl.LoggerInto(context.Background(), ctrl.Log), clk: clk, rt: rt, cri: cri,
		api: &bedAPI{pods: map[types.NamespacedName]*corev1.Pod{}}}
	b.start()
	return b
}

// start builds a fresh reconciler (an agent (re)start: it remembers nothing) over the same runtime and API.
func (b *lifecycleBed) start() {
	b.t.Helper()
	b.rec = record.NewFakeRecorder(1000)
	b.pleg = pleg.New(b.cri, pleg.Options{Clock: b.clk, EventBuffer: 1 << 16})
	root := b.t.TempDir()
	b.logsDir = filepath.Join(root, "logs")
	r, err := New(Deps{Runtime: b.cri, Recorder: b.rec, Clock: b.clk, Client: b.api, Secrets: APIObjects{Reader: b.api},
		Node: bedNodeObject, PLEG: b.pleg, Volumes: b.vols, Static: b.static},
		Options{NodeName: bedNode, RootDir: root, HostIPs: []string{"192.0.2.10"},
			Sandbox: podconfig.SandboxOptions{PodLogsDir: b.logsDir, ClusterDNS: []string{"10.96.0.10"}, ClusterDomain: "cluster.local"}})
	if err != nil {
		b.t.Fatal(err)
	}
	b.r = r
}

func bedNodeObject(context.Context) (*corev1.Node, error) {
	alloc := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi"),
		corev1.ResourcePods: resource.MustParse("110")}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: bedNode},
		Status: corev1.NodeStatus{Allocatable: alloc, Capacity: alloc}}, nil
}

// bedPod is a pod bound to the bed's node with the API server's defaults.
func bedPod(name string, mutate ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name + "-uid")},
		Spec: corev1.PodSpec{
			NodeName: bedNode, RestartPolicy: corev1.RestartPolicyAlways, DNSPolicy: corev1.DNSClusterFirst,
			TerminationGracePeriodSeconds: ptr.To(int64(30)), EnableServiceLinks: ptr.To(true),
			Containers: []corev1.Container{bedContainer("app")},
		},
	}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func bedContainer(name string) corev1.Container {
	return corev1.Container{Name: name, Image: "busybox", ImagePullPolicy: corev1.PullIfNotPresent,
		TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile}
}

// create puts the pod into the API.
func (b *lifecycleBed) create(pod *corev1.Pod) {
	b.api.put(pod)
}

// deleteWithGrace marks the pod deleted with a grace period, as the API server does on a graceful delete.
func (b *lifecycleBed) deleteWithGrace(name string, grace int64) {
	b.api.mutate(name, func(p *corev1.Pod) {
		if p.DeletionTimestamp == nil {
			p.DeletionTimestamp = &metav1.Time{Time: b.clk.Now()}
		}
		p.DeletionGracePeriodSeconds = ptr.To(grace)
	})
}

// sync is a relist, then one Reconcile of the pod; an error fails the test.
func (b *lifecycleBed) sync(name string) ctrl.Result {
	b.t.Helper()
	if err := b.pleg.Relist(b.ctx); err != nil {
		b.t.Fatalf("relist: %v", err)
	}
	res, err := b.r.Reconcile(b.ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}})
	if err != nil {
		b.t.Fatalf("reconcile %s: %v", name, err)
	}
	return res
}

// step moves the clock.
func (b *lifecycleBed) step(d time.Duration) { b.clk.Step(d) }

// waitKill waits until no stop of the pod's containers is running in the background.
func (b *lifecycleBed) waitKill(name string) {
	b.t.Helper()
	b.waitFor("the stop of "+name+"'s containers", func() bool {
		b.r.mu.Lock()
		defer b.r.mu.Unlock()
		for _, w := range b.r.workers {
			if w.Key.Name == name && w.Stopping() {
				return false
			}
		}
		return true
	})
}

// runStubborn runs a pod whose one container, "stubborn", ignores SIGTERM and whose grace period is 300 s;
// it returns the container's ID.
func (b *lifecycleBed) runStubborn(podName string) string {
	b.t.Helper()
	b.rt.ScriptContainer("stubborn", fake.Behaviour{IgnoreSIGTERM: true})
	b.create(bedPod(podName, func(p *corev1.Pod) {
		p.Spec.Containers[0].Name = "stubborn"
		p.Spec.TerminationGracePeriodSeconds = ptr.To(int64(300))
	}))
	b.sync(podName)
	return b.mustRun(podName, "stubborn")
}

// stepUntilStopped moves the clock in small steps (a new stop's timer may not be set yet when it moves)
// until the pod's container no longer runs, and says how long that took on the clock; past limit the test
// fails.
func (b *lifecycleBed) stepUntilStopped(podName, container string, limit time.Duration) time.Duration {
	b.t.Helper()
	var waited time.Duration
	for b.running(podName, container) != "" {
		if waited > limit {
			b.t.Fatalf("%s still running %v after its stop began", container, waited)
		}
		b.step(100 * time.Millisecond)
		waited += 100 * time.Millisecond
		time.Sleep(time.Millisecond)
	}
	return waited
}

// waitFor waits (on the wall clock: for goroutines, never for time to pass on the fake clock) until done.
func (b *lifecycleBed) waitFor(what string, done func() bool) {
	b.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !done(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			b.t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// containers are the runtime's containers of the pod, in creation order.
func (b *lifecycleBed) containers(podName string) []*runtimeapi.Container {
	var out []*runtimeapi.Container
	for _, c := range b.rt.Containers() {
		if c.Labels[runtime.LabelPodName] == podName {
			out = append(out, c)
		}
	}
	return out
}

// running is the ID of the pod's running container name ("" if none).
func (b *lifecycleBed) running(podName, name string) string {
	for _, c := range b.containers(podName) {
		if c.Metadata.Name == name && c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			return c.Id
		}
	}
	return ""
}

// mustRun is the ID of the pod's running container name, which must run.
func (b *lifecycleBed) mustRun(podName, name string) string {
	b.t.Helper()
	id := b.running(podName, name)
	if id == "" {
		b.t.Fatalf("container %s of %s does not run; calls %v", name, podName, b.rt.Calls())
	}
	return id
}

// exit makes the pod's running container name exit with code, a second after the clock's now: a
// container runs for a while, and the runtime orders a container's attempts by their times.
func (b *lifecycleBed) exit(podName, name string, code int32) {
	b.t.Helper()
	b.step(time.Second)
	if err := b.rt.ExitContainer(b.mustRun(podName, name), code, ""); err != nil {
		b.t.Fatal(err)
	}
}

// calls are the CRI calls made so far among methods, in order.
func (b *lifecycleBed) calls(methods ...string) []string {
	var out []string
	for _, c := range b.rt.Calls() {
		if slices.Contains(methods, c) {
			out = append(out, c)
		}
	}
	return out
}

// pod is the pod as the API holds it (nil once deleted).
func (b *lifecycleBed) pod(name string) *corev1.Pod {
	return b.api.get(types.NamespacedName{Namespace: "ns", Name: name})
}

// bedAPI is the API server as the reconciler uses it: pods by name, their list, status patches (a
// strategic merge, as the API server applies them) and deletes. The other methods are not implemented.
type bedAPI struct {
	client.Client
	mu   sync.Mutex
	pods map[types.NamespacedName]*corev1.Pod
	rv   int
}

func (a *bedAPI) put(pod *corev1.Pod) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.rv++
	p := pod.DeepCopy()
	p.ResourceVersion = strconv.Itoa(a.rv)
	a.pods[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}] = p
}

func (a *bedAPI) get(key types.NamespacedName) *corev1.Pod {
	a.mu.Lock()
	defer a.mu.Unlock()
	if p, ok := a.pods[key]; ok {
		return p.DeepCopy()
	}
	return nil
}

func (a *bedAPI) mutate(name string, f func(*corev1.Pod)) {
	p := a.get(types.NamespacedName{Namespace: "ns", Name: name})
	f(p)
	a.put(p)
}

func (a *bedAPI) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	out, ok := obj.(*corev1.Pod)
	if !ok {
		return errors.New("bedAPI: only pods")
	}
	p := a.get(key)
	if p == nil {
		return apierrors.NewNotFound(corev1.Resource("pods"), key.Name)
	}
	p.DeepCopyInto(out)
	return nil
}

func (a *bedAPI) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	out, ok := list.(*corev1.PodList)
	if !ok {
		return errors.New("bedAPI: only pods")
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	out.Items = nil
	for _, p := range a.pods {
		out.Items = append(out.Items, *p.DeepCopy())
	}
	return nil
}

func (a *bedAPI) Delete(_ context.Context, obj client.Object, _ ...client.DeleteOption) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	key := types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}
	if _, ok := a.pods[key]; !ok {
		return apierrors.NewNotFound(corev1.Resource("pods"), key.Name)
	}
	delete(a.pods, key)
	return nil
}

func (a *bedAPI) Status() client.SubResourceWriter { return bedStatus{a: a} }

// bedStatus applies status patches.
type bedStatus struct {
	client.SubResourceWriter
	a *bedAPI
}

func (s bedStatus) Patch(_ context.Context, obj client.Object, patch client.Patch, _ ...client.SubResourcePatchOption) error {
	key := types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}
	p := s.a.get(key)
	if p == nil {
		return apierrors.NewNotFound(corev1.Resource("pods"), key.Name)
	}
	data, err := patch.Data(obj)
	if err != nil {
		return err
	}
	orig, err := json.Marshal(p)
	if err != nil {
		return err
	}
	merged, err := strategicpatch.StrategicMergePatch(orig, data, corev1.Pod{})
	if err != nil {
		return err
	}
	var out corev1.Pod
	if err := json.Unmarshal(merged, &out); err != nil {
		return err
	}
	p.Status = out.Status
	s.a.put(p)
	obj.SetResourceVersion(s.a.get(key).ResourceVersion)
	return nil
}
