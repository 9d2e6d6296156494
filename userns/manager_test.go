package userns

import (
	"context"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"
)

// fakeRuntime announces handlers with or without user namespace support.
type fakeRuntime struct {
	handlers []*runtimeapi.RuntimeHandler
	calls    int
}

func (f *fakeRuntime) Status(context.Context, bool) (*runtimeapi.StatusResponse, error) {
	f.calls++
	return &runtimeapi.StatusResponse{RuntimeHandlers: f.handlers}, nil
}

func handler(name string, userns bool) *runtimeapi.RuntimeHandler {
	return &runtimeapi.RuntimeHandler{Name: name, Features: &runtimeapi.RuntimeHandlerFeatures{UserNamespaces: userns}}
}

func usernsPod(uid string) *corev1.Pod {
	p := &corev1.Pod{Spec: corev1.PodSpec{HostUsers: ptr.To(false)}}
	p.UID = types.UID(uid)
	return p
}

func newTestManager(t *testing.T, root string, mutate ...func(*Options)) *Manager {
	t.Helper()
	opts := Options{RootDir: root, MaxPods: 110, Runtime: &fakeRuntime{handlers: []*runtimeapi.RuntimeHandler{handler("", true)}},
		NodeRange: func(ids uint32) (uint32, uint32, error) { return ids, 4 * ids, nil }, Rand: func(int) int { return 0 }}
	opts.MaxPods = 4
	for _, m := range mutate {
		m(&opts)
	}
	m, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestPodsGetDistinctRangesRecordedInTheKubeletsFile(t *testing.T) {
	root := t.TempDir()
	m := newTestManager(t, root)
	ctx := context.Background()
	a, err := m.PodUserNamespace(ctx, usernsPod("a"), "")
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.PodUserNamespace(ctx, usernsPod("b"), "")
	if err != nil {
		t.Fatal(err)
	}
	if a.Mode != runtimeapi.NamespaceMode_POD || len(a.Uids) != 1 || a.Uids[0].ContainerId != 0 || a.Uids[0].Length != 65536 {
		t.Fatalf("pod a: %v", a)
	}
	if a.Uids[0].HostId == b.Uids[0].HostId {
		t.Fatalf("two pods share host IDs from %d", a.Uids[0].HostId)
	}
	if a.Uids[0].HostId != 65536 || b.Uids[0].HostId != 131072 {
		t.Errorf("ranges %d and %d, want 65536 and 131072", a.Uids[0].HostId, b.Uids[0].HostId)
	}
	data, err := os.ReadFile(filepath.Join(root, "pods", "a", "userns"))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"uidMappings":[{"hostId":65536,"containerId":0,"length":65536}],"gidMappings":[{"hostId":65536,"containerId":0,"length":65536}]}`
	if string(data) != want {
		t.Errorf("file %s, want the kubelet's %s", data, want)
	}
	again, err := m.PodUserNamespace(ctx, usernsPod("a"), "")
	if err != nil || again.Uids[0].HostId != a.Uids[0].HostId {
		t.Errorf("pod a asked again: %v, %v", again, err)
	}
}

func TestHostUsersPodsGetTheNodesNamespace(t *testing.T) {
	m := newTestManager(t, t.TempDir())
	for _, hu := range []*bool{nil, ptr.To(true)} {
		p := &corev1.Pod{Spec: corev1.PodSpec{HostUsers: hu}}
		ns, err := m.PodUserNamespace(context.Background(), p, "")
		if err != nil || ns.Mode != runtimeapi.NamespaceMode_NODE || ns.Uids != nil {
			t.Errorf("hostUsers %v: %v, %v", hu, ns, err)
		}
	}
	if m.InUse() != 0 {
		t.Error("a range was given to a pod in the node's namespace")
	}
}

func TestRestartReadsTheRangesBackAndReleaseFreesThem(t *testing.T) {
	root := t.TempDir()
	ctx := context.Background()
	m := newTestManager(t, root)
	a, _ := m.PodUserNamespace(ctx, usernsPod("a"), "")
	m2 := newTestManager(t, root)
	if m2.InUse() != 1 {
		t.Fatalf("%d ranges after a restart, want 1", m2.InUse())
	}
	b, _ := m2.PodUserNamespace(ctx, usernsPod("b"), "")
	if b.Uids[0].HostId == a.Uids[0].HostId {
		t.Fatal("a restart gave a running pod's range to another pod")
	}
	m2.Release("a")
	if _, err := os.Stat(filepath.Join(root, "pods", "a", "userns")); !os.IsNotExist(err) {
		t.Errorf("the released pod's file is still there: %v", err)
	}
	c, _ := m2.PodUserNamespace(ctx, usernsPod("c"), "")
	if c.Uids[0].HostId != a.Uids[0].HostId {
		t.Errorf("pod c got %d, want the released %d", c.Uids[0].HostId, a.Uids[0].HostId)
	}
}

func TestRemoveOrphansReleasesInactivePodsAndPodsWithoutADirectory(t *testing.T) {
	root := t.TempDir()
	ctx := context.Background()
	m := newTestManager(t, root)
	for _, uid := range []string{"a", "b", "c"} {
		if _, err := m.PodUserNamespace(ctx, usernsPod(uid), ""); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.RemoveAll(filepath.Join(root, "pods", "c")); err != nil {
		t.Fatal(err)
	}
	if err := m.RemoveOrphans(func(uid types.UID) bool { return uid != "b" }); err != nil {
		t.Fatal(err)
	}
	if m.InUse() != 1 {
		t.Errorf("%d ranges in use, want only pod a's", m.InUse())
	}
}

func TestRangesRunOut(t *testing.T) {
	m := newTestManager(t, t.TempDir())
	ctx := context.Background()
	for _, uid := range []string{"a", "b", "c", "d"} {
		if _, err := m.PodUserNamespace(ctx, usernsPod(uid), ""); err != nil {
			t.Fatal(err)
		}
	}
	_, err := m.PodUserNamespace(ctx, usernsPod("e"), "")
	if err == nil || err.Error() != "create user namespace: could not find an empty slot to allocate a user namespace" {
		t.Errorf("fifth pod: %v", err)
	}
}

func TestHandlersWithoutUserNamespacesRefuseThePodWithTheKubeletsMessage(t *testing.T) {
	cases := []struct {
		name     string
		handlers []*runtimeapi.RuntimeHandler
		handler  string
		want     string
	}{
		{"runtime announces no handlers", nil, "", "can't set `spec.hostUsers: false`, runtime does not support user namespaces"},
		{"default handler without support", []*runtimeapi.RuntimeHandler{handler("", false)}, "",
			"can't set `spec.hostUsers: false`, runtime does not support user namespaces"},
		{"RuntimeClass handler without support", []*runtimeapi.RuntimeHandler{handler("", true), handler("kata", false)}, "kata",
			`can't set ` + "`spec.hostUsers: false`" + `, RuntimeClass handler "kata" does not support user namespaces`},
		{"unknown handler", []*runtimeapi.RuntimeHandler{handler("", true)}, "gvisor",
			`can't set ` + "`spec.hostUsers: false`" + `, RuntimeClass handler "gvisor" does not support user namespaces: the handler "gvisor" is not known`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := newTestManager(t, t.TempDir(), func(o *Options) { o.Runtime = &fakeRuntime{handlers: tc.handlers} })
			_, err := m.PodUserNamespace(context.Background(), usernsPod("a"), tc.handler)
			if err == nil || err.Error() != tc.want {
				t.Errorf("got %v, want %s", err, tc.want)
			}
			if m.InUse() != 0 {
				t.Error("a refused pod got a range")
			}
		})
	}
}

func TestCorruptOrConflictingFilesStopTheStartAsTheKubelet(t *testing.T) {
	cases := map[string]struct {
		files map[string]string
		want  string
	}{
		"not JSON": {map[string]string{"a": "{"}, "invalid user namespace mappings file"},
		"two pods, one range": {map[string]string{
			"a": `{"uidMappings":[{"hostId":65536,"containerId":0,"length":65536}],"gidMappings":[{"hostId":65536,"containerId":0,"length":65536}]}`,
			"b": `{"uidMappings":[{"hostId":65536,"containerId":0,"length":65536}],"gidMappings":[{"hostId":65536,"containerId":0,"length":65536}]}`,
		}, "already taken"},
		"another idsPerPod": {map[string]string{
			"a": `{"uidMappings":[{"hostId":131072,"containerId":0,"length":131072}],"gidMappings":[{"hostId":131072,"containerId":0,"length":131072}]}`,
		}, "wrong user namespace length 131072"},
		"UID 0 unmapped": {map[string]string{
			"a": `{"uidMappings":[{"hostId":65536,"containerId":1,"length":65536}],"gidMappings":[{"hostId":65536,"containerId":1,"length":65536}]}`,
		}, "UID 0 must be mapped"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			for uid, content := range tc.files {
				dir := filepath.Join(root, "pods", uid)
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, "userns"), []byte(content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			_, err := New(Options{RootDir: root, NodeRange: func(ids uint32) (uint32, uint32, error) { return ids, 4 * ids, nil }})
			if err == nil || !strings.HasPrefix(err.Error(), "create user namespace manager: record pod mappings for existing pod") ||
				!strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
}

func TestNodeRangeChecks(t *testing.T) {
	cases := []struct {
		first, length uint32
		ids           int64
		maxPods       int
		want          string
	}{
		{65536, 65536 * 10, 65536 * 2, 1, "kubelet user assigned ID 65536 is not a multiple of 131072"},
		{0, 65536 * 10, 0, 1, "kubelet user assigned ID 0 must be greater or equal to 65536"},
		{65536, 65536*10 + 1, 0, 1, "kubelet user assigned IDs length 655361 is not a multiple of 65536"},
		{65536, 65536 * 10, 0, 11, "kubelet user assigned IDs are not enough to support 11 pods"},
	}
	for _, tc := range cases {
		_, err := New(Options{RootDir: t.TempDir(), IDsPerPod: tc.ids, MaxPods: tc.maxPods,
			NodeRange: func(uint32) (uint32, uint32, error) { return tc.first, tc.length, nil }})
		if err == nil || err.Error() != "create user namespace manager: "+tc.want {
			t.Errorf("got %v, want %s", err, tc.want)
		}
	}
}

func TestKubeletRange(t *testing.T) {
	noUser := func(string) (*user.User, error) { return nil, user.UnknownUserError("kubelet") }
	hasUser := func(string) (*user.User, error) { return &user.User{Username: "kubelet"}, nil }
	found := func(string) (string, error) { return "/usr/bin/getsubids", nil }
	out := func(s string) func(...string) ([]byte, error) {
		return func(...string) ([]byte, error) { return []byte(s), nil }
	}
	first, n, err := kubeletRange(65536, noUser, found, out(""))
	if err != nil || first != 65536 || n != 4294901760 {
		t.Errorf("without the kubelet user: %d %d %v", first, n, err)
	}
	first, n, err = kubeletRange(65536, hasUser, func(string) (string, error) { return "", &exec.Error{Name: "getsubids", Err: exec.ErrNotFound} }, out(""))
	if err != nil || first != 65536 || n != 4294901760 {
		t.Errorf("without getsubids: %d %d %v", first, n, err)
	}
	first, n, err = kubeletRange(65536, hasUser, found, out("0: kubelet 65536 2147483648\n"))
	if err != nil || first != 65536 || n != 2147483648 {
		t.Errorf("getsubids: %d %d %v", first, n, err)
	}
	_, _, err = kubeletRange(65536, hasUser, found, out("0: kubelet 65536\n"))
	if err == nil || err.Error() != `invalid line "0: kubelet 65536"` {
		t.Errorf("a short line: %v", err)
	}
	_, _, err = kubeletRange(65536, hasUser, found, func(args ...string) ([]byte, error) {
		if len(args) == 2 {
			return []byte("0: kubelet 131072 65536\n"), nil
		}
		return []byte("0: kubelet 65536 65536\n"), nil
	})
	if err == nil || err.Error() != `mismatched subuids and subgids for user "kubelet"` {
		t.Errorf("mismatched ranges: %v", err)
	}
}
