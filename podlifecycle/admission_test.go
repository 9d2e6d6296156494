package podlifecycle

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

func TestAdmitOS(t *testing.T) {
	tests := []struct {
		name    string
		labels  map[string]string
		os      *corev1.PodOS
		reason  string
		message string
	}{
		{name: "no OS said"},
		{name: "linux label and field", labels: map[string]string{"kubernetes.io/os": "linux"}, os: &corev1.PodOS{Name: corev1.Linux}},
		{name: "windows field", os: &corev1.PodOS{Name: corev1.Windows}, reason: "PodOSNotSupported",
			message: "Failed to admit pod as the OS field doesn't match node OS"},
		{name: "windows label", labels: map[string]string{"kubernetes.io/os": "windows"}, reason: "PodOSSelectorNodeLabelDoesNotMatch",
			message: "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label"},
		{name: "label checked before field", labels: map[string]string{"kubernetes.io/os": "windows"}, os: &corev1.PodOS{Name: corev1.Windows},
			reason: "PodOSSelectorNodeLabelDoesNotMatch"},
		{name: "other labels do not matter", labels: map[string]string{"beta.kubernetes.io/os": "windows"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: tt.labels}, Spec: corev1.PodSpec{OS: tt.os}}
			assertAdmission(t, admitOS(pod, "linux"), tt.reason, tt.message)
		})
	}
}

func TestNewSysctlAllowlistErrors(t *testing.T) {
	tests := []struct {
		pattern, want string
	}{
		{pattern: "kernel.msg*"},
		{pattern: "net.*"},
		{pattern: "net/ipv4/*"},
		{pattern: "fs.mqueue.msg_max"},
		{pattern: "kernel.sem"},
		{pattern: "user.max_user_namespaces"},
		{pattern: "Kernel.msgmax", want: `sysctl "Kernel.msgmax" must have at most 253 characters and match regex`},
		{pattern: "net..core", want: "must have at most 253 characters"},
		{pattern: "kernel.*.x", want: "must have at most 253 characters"},
		{pattern: "kernel.panic", want: `the sysctls "kernel.panic" are not known to be namespaced`},
		{pattern: "vm.*", want: `the sysctls "vm." are not known to be namespaced`},
	}
	for _, tt := range tests {
		t.Run(tt.pattern, func(t *testing.T) {
			_, err := NewSysctlAllowlist("6.1.0", []string{tt.pattern})
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestSafeSysctlsFor(t *testing.T) {
	tests := []struct {
		kernel      string
		has, hasNot []string
	}{
		{kernel: "", has: []string{"kernel.shm_rmid_forced", "net.ipv4.ip_unprivileged_port_start"},
			hasNot: []string{"net.ipv4.ip_local_reserved_ports", "net.ipv4.tcp_keepalive_time"}},
		{kernel: "not-a-version", has: []string{"net.ipv4.ping_group_range"}, hasNot: []string{"net.ipv4.tcp_rmem"}},
		{kernel: "4.5.0", has: []string{"net.ipv4.ip_local_reserved_ports", "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_keepalive_probes"},
			hasNot: []string{"net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_wmem"}},
		{kernel: "4.14.300-foo", has: []string{"net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_notsent_lowat"},
			hasNot: []string{"net.ipv4.tcp_rmem", "net.ipv4.tcp_slow_start_after_idle"}},
		{kernel: "6.1.0-18-amd64", has: []string{"net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem", "net.ipv4.tcp_slow_start_after_idle"}},
	}
	for _, tt := range tests {
		t.Run(tt.kernel, func(t *testing.T) {
			got := map[string]bool{}
			for _, s := range safeSysctlsFor(tt.kernel) {
				got[s] = true
			}
			for _, s := range tt.has {
				if !got[s] {
					t.Errorf("%s missing", s)
				}
			}
			for _, s := range tt.hasNot {
				if got[s] {
					t.Errorf("%s present", s)
				}
			}
		})
	}
	if n := len(safeSysctlsFor("6.1.0")); n != len(safeSysctls) {
		t.Errorf("a recent kernel gets %d safe sysctls, want all %d", n, len(safeSysctls))
	}
}

func TestSysctlAdmission(t *testing.T) {
	withSysctls := func(mutate func(*corev1.PodSpec), kv ...string) *corev1.Pod {
		pod := &corev1.Pod{Spec: corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{}}}
		for i := 0; i+1 < len(kv); i += 2 {
			pod.Spec.SecurityContext.Sysctls = append(pod.Spec.SecurityContext.Sysctls, corev1.Sysctl{Name: kv[i], Value: kv[i+1]})
		}
		if mutate != nil {
			mutate(&pod.Spec)
		}
		return pod
	}
	hostNetwork := func(s *corev1.PodSpec) { s.HostNetwork = true }
	hostIPC := func(s *corev1.PodSpec) { s.HostIPC = true }
	ownUsers := func(s *corev1.PodSpec) { s.HostUsers = ptr.To(false) }
	tests := []struct {
		name    string
		kernel  string
		unsafe  []string
		pod     *corev1.Pod
		reason  string
		message string
	}{
		{name: "no security context", pod: &corev1.Pod{}},
		{name: "safe sysctls", pod: withSysctls(nil, "kernel.shm_rmid_forced", "1", "net.ipv4.ip_local_port_range", "1024 65000")},
		{name: "safe sysctl with slashes", pod: withSysctls(nil, "kernel/shm_rmid_forced", "1")},
		{name: "kernel-dependent safe sysctl on a recent kernel", kernel: "6.1.0", pod: withSysctls(nil, "net.ipv4.tcp_keepalive_time", "600")},
		{name: "kernel-dependent safe sysctl on an old kernel", kernel: "4.4.0", pod: withSysctls(nil, "net.ipv4.tcp_keepalive_time", "600"),
			reason: "SysctlForbidden", message: `forbidden sysctl: "net.ipv4.tcp_keepalive_time" not allowlisted`},
		{name: "unsafe sysctl", pod: withSysctls(nil, "kernel.msgmax", "10000000000"),
			reason: "SysctlForbidden", message: `forbidden sysctl: "kernel.msgmax" not allowlisted`},
		{name: "first forbidden one reported", pod: withSysctls(nil, "kernel.shm_rmid_forced", "1", "kernel.sem", "1", "kernel.msgmax", "1"),
			reason: "SysctlForbidden", message: `forbidden sysctl: "kernel.sem" not allowlisted`},
		{name: "unsafe sysctl allowed by a glob", unsafe: []string{"kernel.msg*"}, pod: withSysctls(nil, "kernel.msgmax", "10000000000")},
		{name: "unsafe sysctl allowed by name", unsafe: []string{"net.core.somaxconn"}, pod: withSysctls(nil, "net.core.somaxconn", "1024")},
		{name: "glob allows slashed names", unsafe: []string{"net.ipv4.conf.*"}, pod: withSysctls(nil, "net/ipv4/conf/all/rp_filter", "0")},
		{name: "glob does not reach further", unsafe: []string{"kernel.msg*"}, pod: withSysctls(nil, "kernel.shmmax", "1"),
			reason: "SysctlForbidden", message: `forbidden sysctl: "kernel.shmmax" not allowlisted`},
		{name: "net sysctl with hostNetwork", pod: withSysctls(hostNetwork, "net.ipv4.ip_local_port_range", "1024 65000"),
			reason: "SysctlForbidden", message: `forbidden sysctl: "net.ipv4.ip_local_port_range" not allowed with host Net enabled`},
		{name: "IPC sysctl with hostIPC", pod: withSysctls(hostIPC, "kernel.shm_rmid_forced", "1"),
			reason: "SysctlForbidden", message: `forbidden sysctl: "kernel.shm_rmid_forced" not allowed with host IPC enabled`},
		{name: "unsafe IPC glob with hostIPC", unsafe: []string{"kernel.msg*"}, pod: withSysctls(hostIPC, "kernel.msgmax", "1"),
			reason: "SysctlForbidden", message: `forbidden sysctl: "kernel.msgmax" not allowed with host IPC enabled`},
		{name: "IPC sysctl with hostNetwork", pod: withSysctls(hostNetwork, "kernel.shm_rmid_forced", "1")},
		{name: "user sysctl in the host user namespace", unsafe: []string{"user.*"}, pod: withSysctls(nil, "user.max_user_namespaces", "0"),
			reason: "SysctlForbidden", message: `forbidden sysctl: "user.max_user_namespaces" not allowed with host User enabled`},
		{name: "user sysctl in its own user namespace", unsafe: []string{"user.*"}, pod: withSysctls(ownUsers, "user.max_user_namespaces", "0")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := NewSysctlAllowlist(tt.kernel, tt.unsafe)
			if err != nil {
				t.Fatal(err)
			}
			assertAdmission(t, a.admit(tt.pod), tt.reason, tt.message)
		})
	}
}

func TestNilSysctlAllowlistIsTheSafeSet(t *testing.T) {
	var a *SysctlAllowlist
	safe := &corev1.Pod{Spec: corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{
		Sysctls: []corev1.Sysctl{{Name: "kernel.shm_rmid_forced", Value: "1"}}}}}
	assertAdmission(t, a.admit(safe), "", "")
	unsafe := safe.DeepCopy()
	unsafe.Spec.SecurityContext.Sysctls[0].Name = "kernel.msgmax"
	assertAdmission(t, a.admit(unsafe), "SysctlForbidden", `forbidden sysctl: "kernel.msgmax" not allowlisted`)
}

func TestRunAdmitHandlersOrder(t *testing.T) {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"zone": "a"}},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourcePods: resource.MustParse("10")}},
	}
	pod := func(mutate func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}}
		mutate(p)
		return p
	}
	bigCPU := func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
	}
	otherZone := func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"zone": "b"} }
	windows := func(p *corev1.Pod) { p.Spec.OS = &corev1.PodOS{Name: corev1.Windows} }
	unsafeSysctl := func(p *corev1.Pod) {
		p.Spec.SecurityContext = &corev1.PodSecurityContext{Sysctls: []corev1.Sysctl{{Name: "kernel.msgmax", Value: "1"}}}
	}
	tests := []struct {
		name   string
		pod    *corev1.Pod
		reason string
	}{
		{name: "admitted", pod: pod(func(*corev1.Pod) {})},
		{name: "sysctls before the predicates", pod: pod(func(p *corev1.Pod) { unsafeSysctl(p); windows(p); bigCPU(p) }), reason: "SysctlForbidden"},
		{name: "OS before resources", pod: pod(func(p *corev1.Pod) { windows(p); bigCPU(p); otherZone(p) }), reason: "PodOSNotSupported"},
		{name: "resources before node affinity", pod: pod(func(p *corev1.Pod) { bigCPU(p); otherZone(p) }), reason: "OutOfcpu"},
		{name: "node affinity", pod: pod(otherZone), reason: "NodeAffinity"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assertAdmission(t, runAdmitHandlers(context.Background(), tt.pod, node, nil, nil, noDevices{}, nil), tt.reason, "")
		})
	}
}

// failingDevices is a device manager with no devices to give; it counts its allocations.
type failingDevices struct {
	noDevices
	calls int
}

func (d *failingDevices) Allocate(context.Context, *corev1.Pod, func(types.UID) bool) error {
	d.calls++
	return errors.New("requested number of devices unavailable for example.com/resource. Requested: 3, Available: 2")
}

// The device manager's allocation runs after the sysctls and before the predicates, and its failure is
// the kubelet's UnexpectedAdmissionError.
func TestDeviceAllocationFailureRejects(t *testing.T) {
	node := &corev1.Node{Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourcePods: resource.MustParse("10")}}}
	d := &failingDevices{}
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}}
	assertAdmission(t, runAdmitHandlers(context.Background(), pod, node, nil, nil, d, nil), "UnexpectedAdmissionError",
		"Allocate failed due to requested number of devices unavailable for example.com/resource. Requested: 3, Available: 2, which is unexpected")
	unsafe := pod.DeepCopy()
	unsafe.Spec.SecurityContext = &corev1.PodSecurityContext{Sysctls: []corev1.Sysctl{{Name: "kernel.msgmax", Value: "1"}}}
	assertAdmission(t, runAdmitHandlers(context.Background(), unsafe, node, nil, nil, d, nil), "SysctlForbidden", "")
	if d.calls != 1 {
		t.Fatalf("%d allocations, want 1 (none for a pod the sysctls reject)", d.calls)
	}
}

// assertAdmission checks an admission result: admitted when reason is "", else rejected with that
// reason (and message, unless "").
func assertAdmission(t *testing.T, res admissionResult, reason, message string) {
	t.Helper()
	if reason == "" {
		if !res.admit {
			t.Fatalf("rejected: %s: %s", res.reason, res.message)
		}
		return
	}
	if res.admit || res.reason != reason {
		t.Fatalf("got %+v, want rejection %s", res, reason)
	}
	if message != "" && res.message != message {
		t.Fatalf("message = %q\nwant      %q", res.message, message)
	}
}

// Ephemeral storage requests are checked against the node's allocatable as the kubelet's predicate: a
// node without ephemeral-storage (localStorageCapacityIsolation off) has none to give.
func TestAdmitEphemeralStorage(t *testing.T) {
	storage := func(req string) *corev1.Pod {
		p := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}}
		if req != "" {
			p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse(req)}
		}
		return p
	}
	node := func(alloc corev1.ResourceList) *corev1.Node {
		return &corev1.Node{Status: corev1.NodeStatus{Allocatable: alloc}}
	}
	withStorage := node(corev1.ResourceList{corev1.ResourcePods: resource.MustParse("110"),
		corev1.ResourceEphemeralStorage: resource.MustParse("10Gi")})
	without := node(corev1.ResourceList{corev1.ResourcePods: resource.MustParse("110")})
	admitted := []*corev1.Pod{storage("5Gi")}
	assertAdmission(t, admitResources(storage("5Gi"), withStorage, admitted), "", "")
	assertAdmission(t, admitResources(storage("6Gi"), withStorage, admitted), "OutOfephemeral-storage",
		"Node didn't have enough resource: ephemeral-storage, requested: 6442450944, used: 5368709120, capacity: 10737418240")
	assertAdmission(t, admitResources(storage("1Gi"), without, nil), "OutOfephemeral-storage",
		"Node didn't have enough resource: ephemeral-storage, requested: 1073741824, used: 0, capacity: 0")
	assertAdmission(t, admitResources(storage(""), without, nil), "", "")
	assertAdmission(t, admitResources(storage("1Gi"), nil, nil), "", "")
}

func TestSupplementalGroupsPolicyStrictNeedsTheRuntimesSupport(t *testing.T) {
	const msg = "SupplementalGroupsPolicy=Strict is not supported in this node"
	tests := []struct {
		name      string
		policy    *corev1.SupplementalGroupsPolicy
		supported *bool
		reason    string
	}{
		{name: "no policy"},
		{name: "Merge on a node without the feature", policy: ptr.To(corev1.SupplementalGroupsPolicyMerge)},
		{name: "Strict on a node that supports it", policy: ptr.To(corev1.SupplementalGroupsPolicyStrict), supported: ptr.To(true)},
		{name: "Strict, runtime says no", policy: ptr.To(corev1.SupplementalGroupsPolicyStrict), supported: ptr.To(false),
			reason: "SupplementalGroupsPolicyNotSupported"},
		{name: "Strict, runtime says nothing", policy: ptr.To(corev1.SupplementalGroupsPolicyStrict),
			reason: "SupplementalGroupsPolicyNotSupported"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &corev1.Pod{Spec: corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{SupplementalGroupsPolicy: tt.policy}}}
			node := &corev1.Node{}
			if tt.supported != nil {
				node.Status.Features = &corev1.NodeFeatures{SupplementalGroupsPolicy: tt.supported}
			}
			want := ""
			if tt.reason != "" {
				want = msg
			}
			assertAdmission(t, admitSupplementalGroupsPolicy(pod, node), tt.reason, want)
		})
	}
}

// TestAdmitHostPortsNodeNameAndTaints: the GeneralPredicates after node affinity, in the kubelet's order and
// words: a host port an admitted pod holds (same protocol and port, same IP or either one all IPs; sidecars
// count, plain init containers not), another node's name, a NoExecute taint not tolerated (static pods are
// not checked for it).
func TestAdmitHostPortsNodeNameAndTaints(t *testing.T) {
	port := func(hostIP string, proto corev1.Protocol, p int32) corev1.ContainerPort {
		return corev1.ContainerPort{ContainerPort: 80, HostPort: p, HostIP: hostIP, Protocol: proto}
	}
	pod := func(ports ...corev1.ContainerPort) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c", Ports: ports}}}}
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
		corev1.ResourcePods: resource.MustParse("110")}}}
	const portsMsg = "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports"
	holder := pod(port("", "", 8080))
	assertAdmission(t, admit(pod(port("", "", 8080)), node, []*corev1.Pod{holder}), "NodePorts", portsMsg)
	assertAdmission(t, admit(pod(port("10.0.0.1", corev1.ProtocolTCP, 8080)), node, []*corev1.Pod{holder}), "NodePorts", portsMsg)
	assertAdmission(t, admit(pod(port("", corev1.ProtocolUDP, 8080)), node, []*corev1.Pod{holder}), "", "")
	assertAdmission(t, admit(pod(port("", "", 8081)), node, []*corev1.Pod{holder}), "", "")
	byIP := pod(port("10.0.0.1", "", 9000))
	assertAdmission(t, admit(pod(port("10.0.0.2", "", 9000)), node, []*corev1.Pod{byIP}), "", "")
	assertAdmission(t, admit(pod(port("0.0.0.0", "", 9000)), node, []*corev1.Pod{byIP}), "NodePorts", portsMsg)
	sidecar := &corev1.Pod{Spec: corev1.PodSpec{InitContainers: []corev1.Container{
		{Name: "s", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways), Ports: []corev1.ContainerPort{port("", "", 7000)}},
		{Name: "i", Ports: []corev1.ContainerPort{port("", "", 7001)}}}}}
	assertAdmission(t, admit(pod(port("", "", 7000)), node, []*corev1.Pod{sidecar}), "NodePorts", portsMsg)
	assertAdmission(t, admit(pod(port("", "", 7001)), node, []*corev1.Pod{sidecar}), "", "")

	other := pod()
	other.Spec.NodeName = "n2"
	assertAdmission(t, admit(other, node, nil), "NodeName", "Predicate NodeName failed: node(s) didn't match the requested node name")

	tainted := node.DeepCopy()
	tainted.Spec.Taints = []corev1.Taint{{Key: "k", Value: "v", Effect: corev1.TaintEffectNoExecute},
		{Key: "s", Effect: corev1.TaintEffectNoSchedule}}
	assertAdmission(t, admit(pod(), tainted, nil), "TaintToleration",
		"Predicate TaintToleration failed: node(s) had taints that the pod didn't tolerate")
	tolerating := pod()
	tolerating.Spec.Tolerations = []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpEqual, Value: "v", Effect: corev1.TaintEffectNoExecute}}
	assertAdmission(t, admit(tolerating, tainted, nil), "", "")
	static := pod()
	static.Annotations = map[string]string{"kubernetes.io/config.source": "file"}
	assertAdmission(t, admit(static, tainted, nil), "", "")
}
