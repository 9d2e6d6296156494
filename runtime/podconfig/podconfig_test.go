package podconfig

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/podrules"
	"github.com/nodelet/nodelet/runtime"
)

const gi = 1 << 30

// rl builds a ResourceList from name/quantity pairs.
func rl(kv ...string) corev1.ResourceList {
	l := corev1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
}

func resources(req, lim corev1.ResourceList) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{Requests: req, Limits: lim}
}

// testPod is a Burstable pod with one container, as the API server would default it.
func testPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web", Namespace: "default", UID: "1234-abcd",
			Labels:      map[string]string{"app": "web"},
			Annotations: map[string]string{"note": "x"},
		},
		Spec: corev1.PodSpec{
			NodeName:           "node1",
			ServiceAccountName: "default",
			DNSPolicy:          corev1.DNSClusterFirst,
			RestartPolicy:      corev1.RestartPolicyAlways,
			SecurityContext:    &corev1.PodSecurityContext{},
			EnableServiceLinks: ptr.To(true),
			Containers: []corev1.Container{{
				Name:                     "app",
				Image:                    "busybox:1.36",
				TerminationMessagePath:   corev1.TerminationMessagePathDefault,
				TerminationMessagePolicy: corev1.TerminationMessageReadFile,
				Resources:                resources(rl("cpu", "100m", "memory", "64Mi"), rl("cpu", "200m", "memory", "128Mi")),
			}},
		},
	}
}

func sandboxOpts() SandboxOptions {
	return SandboxOptions{
		ClusterDNS:    []string{"10.96.0.10"},
		ClusterDomain: "cluster.local",
		CgroupDriver:  "cgroupfs",
		CgroupsPerQOS: true,
		CgroupRoot:    "/",
		NodeHostname:  "node1",
	}
}

func assertProto(t *testing.T, got, want proto.Message) {
	t.Helper()
	if !proto.Equal(got, want) {
		t.Errorf("got:\n%s\nwant:\n%s", prototext.Format(got), prototext.Format(want))
	}
}

func podNamespaces(network, pid, ipc runtimeapi.NamespaceMode) *runtimeapi.NamespaceOption {
	return &runtimeapi.NamespaceOption{Network: network, Pid: pid, Ipc: ipc,
		UsernsOptions: &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_NODE}}
}

func TestSandboxConfigPlainPod(t *testing.T) {
	pod := testPod()
	pod.Spec.SecurityContext = &corev1.PodSecurityContext{
		RunAsUser: ptr.To[int64](1000), RunAsGroup: ptr.To[int64](3000), FSGroup: ptr.To[int64](2000),
		SupplementalGroups: []int64{4000},
		Sysctls:            []corev1.Sysctl{{Name: "net.core.somaxconn", Value: "1024"}},
	}
	pod.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080, Protocol: corev1.ProtocolTCP}}

	got, err := SandboxConfig(pod, 2, sandboxOpts())
	if err != nil {
		t.Fatal(err)
	}
	want := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default", Uid: "1234-abcd", Attempt: 2},
		Hostname:     "web",
		LogDirectory: "/var/log/pods/default_web_1234-abcd",
		DnsConfig: &runtimeapi.DNSConfig{
			Servers:  []string{"10.96.0.10"},
			Searches: []string{"default.svc.cluster.local", "svc.cluster.local", "cluster.local"},
			Options:  []string{"ndots:5"},
		},
		PortMappings: []*runtimeapi.PortMapping{{Protocol: runtimeapi.Protocol_TCP, ContainerPort: 80, HostPort: 8080}},
		Labels: map[string]string{"app": "web", runtime.LabelPodName: "web", runtime.LabelPodNamespace: "default",
			runtime.LabelPodUID: "1234-abcd"},
		Annotations: map[string]string{"note": "x"},
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			CgroupParent: "/kubepods/burstable/pod1234-abcd",
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
				NamespaceOptions:   podNamespaces(runtimeapi.NamespaceMode_POD, runtimeapi.NamespaceMode_CONTAINER, runtimeapi.NamespaceMode_POD),
				RunAsUser:          &runtimeapi.Int64Value{Value: 1000},
				RunAsGroup:         &runtimeapi.Int64Value{Value: 3000},
				SupplementalGroups: []int64{2000, 4000},
				Seccomp:            &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault},
			},
			Sysctls:   map[string]string{"net.core.somaxconn": "1024"},
			Resources: &runtimeapi.LinuxContainerResources{CpuShares: 102, CpuQuota: 20000, CpuPeriod: 100000, MemoryLimitInBytes: 128 << 20},
			Overhead:  &runtimeapi.LinuxContainerResources{},
		},
	}
	assertProto(t, got, want)
}

func TestSandboxConfigHostNetwork(t *testing.T) {
	tests := []struct {
		name    string
		policy  corev1.DNSPolicy
		wantDNS *runtimeapi.DNSConfig
	}{
		{name: "ClusterFirst means Default: no resolv.conf, the runtime copies the host's", policy: corev1.DNSClusterFirst},
		{name: "ClusterFirstWithHostNet", policy: corev1.DNSClusterFirstWithHostNet, wantDNS: &runtimeapi.DNSConfig{
			Servers:  []string{"10.96.0.10"},
			Searches: []string{"default.svc.cluster.local", "svc.cluster.local", "cluster.local"},
			Options:  []string{"ndots:5"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := testPod()
			pod.Spec.HostNetwork, pod.Spec.HostPID, pod.Spec.HostIPC = true, true, true
			pod.Spec.DNSPolicy = tt.policy
			pod.Spec.InitContainers = []corev1.Container{{Name: "init", SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)}}}
			got, err := SandboxConfig(pod, 0, sandboxOpts())
			if err != nil {
				t.Fatal(err)
			}
			if got.Hostname != "" {
				t.Errorf("hostname = %q, want none (the node's UTS namespace)", got.Hostname)
			}
			assertProto(t, got.DnsConfig, tt.wantDNS)
			sc := got.Linux.SecurityContext
			assertProto(t, sc.NamespaceOptions, podNamespaces(runtimeapi.NamespaceMode_NODE, runtimeapi.NamespaceMode_NODE, runtimeapi.NamespaceMode_NODE))
			if !sc.Privileged {
				t.Error("sandbox not privileged though an init container is")
			}
		})
	}
}

func TestSandboxConfigErrors(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*corev1.Pod, *SandboxOptions)
		want   string
	}{
		{"invalid hostname", func(p *corev1.Pod, _ *SandboxOptions) { p.Spec.Hostname = "Not_Valid" }, `pod Hostname "Not_Valid" is not a valid DNS label`},
		{"FQDN too long", func(p *corev1.Pod, _ *SandboxOptions) {
			p.Spec.Hostname, p.Spec.Subdomain, p.Spec.SetHostnameAsFQDN = strings.Repeat("h", 30), strings.Repeat("s", 30), ptr.To(true)
		}, "is too long (64 characters is the max"},
		{"user namespaces", func(p *corev1.Pod, _ *SandboxOptions) { p.Spec.HostUsers = ptr.To(false) }, "spec.hostUsers: false"},
		{"missing resolv.conf", func(_ *corev1.Pod, o *SandboxOptions) { o.ResolvConf = "/nonexistent/resolv.conf" }, "open resolv.conf"},
		{"bad supplementalGroupsPolicy", func(p *corev1.Pod, _ *SandboxOptions) {
			p.Spec.SecurityContext.SupplementalGroupsPolicy = ptr.To(corev1.SupplementalGroupsPolicy("Loose"))
		}, "unsupported supplementalGroupsPolicy: Loose"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod, opts := testPod(), sandboxOpts()
			tt.mutate(pod, &opts)
			_, err := SandboxConfig(pod, 0, opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestSandboxHostname(t *testing.T) {
	long := strings.Repeat("a", 62) + "-b" // 64 chars: cut to 63 ends in '-'
	tests := []struct {
		name   string
		mutate func(*corev1.Pod)
		want   string
	}{
		{"pod name", func(*corev1.Pod) {}, "web"},
		{"spec.hostname", func(p *corev1.Pod) { p.Spec.Hostname = "front" }, "front"},
		{"subdomain alone does not change the hostname", func(p *corev1.Pod) { p.Spec.Subdomain = "sub" }, "web"},
		{"FQDN", func(p *corev1.Pod) { p.Spec.Subdomain, p.Spec.SetHostnameAsFQDN = "sub", ptr.To(true) }, "web.sub.default.svc.cluster.local"},
		{"truncated to 63, trailing '-' dropped", func(p *corev1.Pod) { p.Name = long }, strings.Repeat("a", 62)},
		{"hostnameOverride", func(p *corev1.Pod) { p.Spec.HostnameOverride = ptr.To("my.host") }, "my.host"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := testPod()
			tt.mutate(pod)
			got, err := SandboxConfig(pod, 0, sandboxOpts())
			if err != nil {
				t.Fatal(err)
			}
			if got.Hostname != tt.want {
				t.Errorf("hostname = %q, want %q", got.Hostname, tt.want)
			}
		})
	}
}

func TestPortMappings(t *testing.T) {
	tests := []struct {
		name  string
		ports [][]corev1.ContainerPort // per container
		want  []*runtimeapi.PortMapping
	}{
		{name: "none"},
		{
			name: "protocols and host IPs, all containers",
			ports: [][]corev1.ContainerPort{
				{{ContainerPort: 53, HostPort: 5353, Protocol: corev1.ProtocolUDP, HostIP: "127.0.0.1"}},
				{{ContainerPort: 9000, HostPort: 9000, Protocol: corev1.ProtocolSCTP}, {ContainerPort: 81, HostPort: 8081, Protocol: "weird"}},
			},
			want: []*runtimeapi.PortMapping{
				{Protocol: runtimeapi.Protocol_UDP, ContainerPort: 53, HostPort: 5353, HostIp: "127.0.0.1"},
				{Protocol: runtimeapi.Protocol_SCTP, ContainerPort: 9000, HostPort: 9000},
				{Protocol: runtimeapi.Protocol_TCP, ContainerPort: 81, HostPort: 8081},
			},
		},
		{
			name:  "ports without hostPort are passed like the kubelet does",
			ports: [][]corev1.ContainerPort{{{Name: "http", ContainerPort: 80, Protocol: corev1.ProtocolTCP}}},
			want:  []*runtimeapi.PortMapping{{Protocol: runtimeapi.Protocol_TCP, ContainerPort: 80}},
		},
		{
			name: "a name used twice in a container counts once; v4 and v6 of one port are distinct",
			ports: [][]corev1.ContainerPort{{
				{Name: "http", ContainerPort: 80, HostPort: 80, Protocol: corev1.ProtocolTCP},
				{Name: "http", ContainerPort: 81, HostPort: 81, Protocol: corev1.ProtocolTCP},
				{ContainerPort: 443, HostPort: 443, Protocol: corev1.ProtocolTCP, HostIP: "0.0.0.0"},
				{ContainerPort: 443, HostPort: 443, Protocol: corev1.ProtocolTCP, HostIP: "::"},
			}},
			want: []*runtimeapi.PortMapping{
				{Protocol: runtimeapi.Protocol_TCP, ContainerPort: 80, HostPort: 80},
				{Protocol: runtimeapi.Protocol_TCP, ContainerPort: 443, HostPort: 443, HostIp: "0.0.0.0"},
				{Protocol: runtimeapi.Protocol_TCP, ContainerPort: 443, HostPort: 443, HostIp: "::"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := testPod()
			pod.Spec.Containers = nil
			for i, ports := range tt.ports {
				pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: string(rune('a' + i)), Ports: ports})
			}
			pod.Spec.InitContainers = []corev1.Container{{Name: "init", Ports: []corev1.ContainerPort{{ContainerPort: 1, HostPort: 1}}}}
			got := portMappings(pod)
			if len(got) != len(tt.want) {
				t.Fatalf("got %d mappings %v, want %d", len(got), got, len(tt.want))
			}
			for i := range got {
				assertProto(t, got[i], tt.want[i])
			}
		})
	}
}

func TestPodCgroupParent(t *testing.T) {
	guaranteed := resources(rl("cpu", "1", "memory", "1Gi"), rl("cpu", "1", "memory", "1Gi"))
	burstable := resources(rl("cpu", "100m"), nil)
	tests := []struct {
		name      string
		res       corev1.ResourceRequirements
		driver    string
		root      string
		perQOS    bool
		wantCgrou string
	}{
		{"guaranteed cgroupfs", guaranteed, "cgroupfs", "/", true, "/kubepods/pod1234-abcd"},
		{"burstable cgroupfs", burstable, "cgroupfs", "/", true, "/kubepods/burstable/pod1234-abcd"},
		{"besteffort cgroupfs", corev1.ResourceRequirements{}, "cgroupfs", "", true, "/kubepods/besteffort/pod1234-abcd"},
		{"cgroupfs under a custom root", burstable, "cgroupfs", "/custom/root", true, "/custom/root/kubepods/burstable/pod1234-abcd"},
		{"guaranteed systemd", guaranteed, "systemd", "/", true, "/kubepods.slice/kubepods-pod1234_abcd.slice"},
		{"burstable systemd", burstable, "systemd", "/", true,
			"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234_abcd.slice"},
		{"besteffort systemd", corev1.ResourceRequirements{}, "systemd", "/", true,
			"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1234_abcd.slice"},
		{"no QoS cgroups: left to the runtime", burstable, "systemd", "/", false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := testPod()
			pod.Spec.Containers[0].Resources = tt.res
			got := PodCgroupParent(pod, SandboxOptions{CgroupDriver: tt.driver, CgroupRoot: tt.root, CgroupsPerQOS: tt.perQOS})
			if got != tt.wantCgrou {
				t.Errorf("got %q, want %q", got, tt.wantCgrou)
			}
		})
	}
}

func TestSandboxResources(t *testing.T) {
	tests := []struct {
		name     string
		mutate   func(*corev1.Pod)
		want     *runtimeapi.LinuxContainerResources
		overhead *runtimeapi.LinuxContainerResources
	}{
		{"best effort", func(p *corev1.Pod) { p.Spec.Containers[0].Resources = corev1.ResourceRequirements{} },
			&runtimeapi.LinuxContainerResources{CpuShares: 2, CpuPeriod: 100000}, &runtimeapi.LinuxContainerResources{}},
		{"containers add up, init containers peak", func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "b",
				Resources: resources(rl("cpu", "300m"), rl("cpu", "300m", "memory", "128Mi"))})
			p.Spec.InitContainers = []corev1.Container{{Name: "i", Resources: resources(rl("cpu", "1"), rl("cpu", "1"))}}
		}, &runtimeapi.LinuxContainerResources{CpuShares: 1024, CpuQuota: 100000, CpuPeriod: 100000, MemoryLimitInBytes: 256 << 20},
			&runtimeapi.LinuxContainerResources{}},
		{"pod-level resources and overhead", func(p *corev1.Pod) {
			p.Spec.Resources = &corev1.ResourceRequirements{Requests: rl("cpu", "500m"), Limits: rl("cpu", "1", "memory", "1Gi")}
			p.Spec.Overhead = rl("cpu", "250m", "memory", "120Mi")
		}, &runtimeapi.LinuxContainerResources{CpuShares: 512, CpuQuota: 100000, CpuPeriod: 100000, MemoryLimitInBytes: gi},
			&runtimeapi.LinuxContainerResources{CpuShares: 256, CpuQuota: 25000, CpuPeriod: 100000, MemoryLimitInBytes: 120 << 20}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := testPod()
			tt.mutate(pod)
			got, err := SandboxConfig(pod, 0, sandboxOpts())
			if err != nil {
				t.Fatal(err)
			}
			assertProto(t, got.Linux.Resources, tt.want)
			assertProto(t, got.Linux.Overhead, tt.overhead)
		})
	}
}

func TestPodLogDir(t *testing.T) {
	pod := testPod()
	if got, err := PodLogDir("", pod); err != nil || got != "/var/log/pods/default_web_1234-abcd" {
		t.Errorf("default dir: %q, %v", got, err)
	}
	if got, err := PodLogDir("/logs", pod); err != nil || got != "/logs/default_web_1234-abcd" {
		t.Errorf("custom dir: %q, %v", got, err)
	}
}

func TestRuntimeHandler(t *testing.T) {
	lookup := func(class string) (string, error) {
		if class == "kata" {
			return "kata-qemu", nil
		}
		return "", errors.New("runtimeclass.node.k8s.io \"" + class + "\" not found")
	}
	tests := []struct {
		name    string
		class   *string
		lookup  func(string) (string, error)
		want    string
		wantErr bool
	}{
		{"no runtime class", nil, lookup, "", false},
		{"no lookup", ptr.To("kata"), nil, "", false},
		{"known class", ptr.To("kata"), lookup, "kata-qemu", false},
		{"unknown class", ptr.To("gvisor"), lookup, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := testPod()
			pod.Spec.RuntimeClassName = tt.class
			got, err := RuntimeHandler(pod, tt.lookup)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("got %q, %v; want %q, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func containerOpts() ContainerOptions {
	return ContainerOptions{
		Env: []*runtimeapi.KeyValue{
			{Key: "GREETING", Value: []byte("hello")},
			{Key: "NAME", Value: []byte("world")},
		},
		Mounts:             []*runtimeapi.Mount{{HostPath: "/var/lib/nodelet/pods/1234-abcd/volumes/data", ContainerPath: "/data"}},
		Files:              ContainerFiles{EtcHosts: "/var/lib/nodelet/pods/1234-abcd/etc-hosts", TerminationLog: "/var/lib/nodelet/pods/1234-abcd/containers/app/0a1b2c3d"},
		PodIPs:             []string{"10.244.0.5"},
		ImageRef:           "sha256:abcdef",
		NodeMemoryCapacity: 4 * gi,
	}
}

func TestContainerConfig(t *testing.T) {
	pod := testPod()
	c := &pod.Spec.Containers[0]
	c.Command = []string{"/bin/sh", "-c"}
	c.Args = []string{"echo $(GREETING) $(NAME) $$(NAME) $(MISSING)"}
	c.WorkingDir = "/work"
	c.Stdin, c.StdinOnce, c.TTY = true, true, true

	got, err := ContainerConfig(pod, c, runtime.KindRegular, 3, containerOpts())
	if err != nil {
		t.Fatal(err)
	}
	want := &runtimeapi.ContainerConfig{
		Metadata:   &runtimeapi.ContainerMetadata{Name: "app", Attempt: 3},
		Image:      &runtimeapi.ImageSpec{Image: "sha256:abcdef", UserSpecifiedImage: "busybox:1.36"},
		Command:    []string{"/bin/sh", "-c"},
		Args:       []string{"echo hello world $(NAME) $(MISSING)"},
		WorkingDir: "/work",
		Envs:       containerOpts().Env,
		Mounts: []*runtimeapi.Mount{
			{HostPath: "/var/lib/nodelet/pods/1234-abcd/volumes/data", ContainerPath: "/data"},
			{HostPath: "/var/lib/nodelet/pods/1234-abcd/etc-hosts", ContainerPath: "/etc/hosts"},
			{HostPath: "/var/lib/nodelet/pods/1234-abcd/containers/app/0a1b2c3d", ContainerPath: "/dev/termination-log"},
		},
		Labels:      ContainerLabels(pod, "app"),
		Annotations: ContainerAnnotations(pod, c, runtime.KindRegular, 3),
		LogPath:     "app/3.log",
		Stdin:       true, StdinOnce: true, Tty: true,
		Linux: &runtimeapi.LinuxContainerConfig{
			Resources: &runtimeapi.LinuxContainerResources{
				CpuShares: 102, CpuQuota: 20000, CpuPeriod: 100000, MemoryLimitInBytes: 128 << 20, OomScoreAdj: 985,
			},
			SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
				NamespaceOptions: podNamespaces(runtimeapi.NamespaceMode_POD, runtimeapi.NamespaceMode_CONTAINER, runtimeapi.NamespaceMode_POD),
				MaskedPaths:      defaultMaskedPaths(),
				ReadonlyPaths:    defaultReadonlyPaths,
				Seccomp:          &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined},
			},
		},
	}
	assertProto(t, got, want)
	if got.Annotations[runtime.AnnotationContainerRestartCount] != "3" || got.Labels[runtime.LabelContainerName] != "app" {
		t.Errorf("labels %v / annotations %v lack the container's identity", got.Labels, got.Annotations)
	}
}

func TestContainerMounts(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*corev1.Container, *ContainerOptions)
		want   []string // container paths
	}{
		{"volumes, hosts, termination log", func(*corev1.Container, *ContainerOptions) {}, []string{"/data", "/etc/hosts", "/dev/termination-log"}},
		{"no hosts file", func(_ *corev1.Container, o *ContainerOptions) { o.Files.EtcHosts = "" }, []string{"/data", "/dev/termination-log"}},
		{"container mounts its own /etc/hosts", func(c *corev1.Container, o *ContainerOptions) {
			c.VolumeMounts = []corev1.VolumeMount{{Name: "hosts", MountPath: "/etc/hosts"}}
			o.Mounts = append(o.Mounts, &runtimeapi.Mount{HostPath: "/h", ContainerPath: "/etc/hosts"})
		}, []string{"/data", "/etc/hosts", "/dev/termination-log"}},
		{"custom termination message path", func(c *corev1.Container, _ *ContainerOptions) { c.TerminationMessagePath = "/tmp/msg" },
			[]string{"/data", "/etc/hosts", "/tmp/msg"}},
		{"no termination message path", func(c *corev1.Container, _ *ContainerOptions) { c.TerminationMessagePath = "" },
			[]string{"/data", "/etc/hosts"}},
		{"no termination log file", func(_ *corev1.Container, o *ContainerOptions) { o.Files.TerminationLog = "" },
			[]string{"/data", "/etc/hosts"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod, opts := testPod(), containerOpts()
			c := &pod.Spec.Containers[0]
			tt.mutate(c, &opts)
			cfg, err := ContainerConfig(pod, c, runtime.KindRegular, 0, opts)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, m := range cfg.Mounts {
				got = append(got, m.ContainerPath)
			}
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Errorf("mounts %v, want %v", got, tt.want)
			}
		})
	}
}

func TestContainerResources(t *testing.T) {
	tests := []struct {
		name   string
		pod    func(*corev1.Pod)
		opts   func(*ContainerOptions)
		want   *runtimeapi.LinuxContainerResources
		target int // index of the container to configure; -1 = first init container
	}{
		{name: "burstable", want: &runtimeapi.LinuxContainerResources{CpuShares: 102, CpuQuota: 20000, CpuPeriod: 100000, MemoryLimitInBytes: 128 << 20, OomScoreAdj: 985}},
		{name: "guaranteed", pod: func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources = resources(rl("cpu", "2", "memory", "1Gi"), rl("cpu", "2", "memory", "1Gi"))
		}, want: &runtimeapi.LinuxContainerResources{CpuShares: 2048, CpuQuota: 200000, CpuPeriod: 100000, MemoryLimitInBytes: gi, OomScoreAdj: -997}},
		{name: "best effort: minimum shares, no quota", pod: func(p *corev1.Pod) { p.Spec.Containers[0].Resources = corev1.ResourceRequirements{} },
			want: &runtimeapi.LinuxContainerResources{CpuShares: 2, CpuPeriod: 100000, OomScoreAdj: 1000}},
		{name: "tiny request: shares at least 2, quota at least 1ms", pod: func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources = resources(rl("cpu", "1m"), rl("cpu", "1m"))
		}, want: &runtimeapi.LinuxContainerResources{CpuShares: 2, CpuQuota: 1000, CpuPeriod: 100000, OomScoreAdj: 999}},
		{name: "cpu request defaults to the limit", pod: func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources = resources(rl("memory", "1Gi"), rl("cpu", "500m"))
		}, want: &runtimeapi.LinuxContainerResources{CpuShares: 512, CpuQuota: 50000, CpuPeriod: 100000, OomScoreAdj: 750}},
		{name: "pod-level limits stand in for unset ones", pod: func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources = resources(rl("cpu", "100m"), nil)
			p.Spec.Resources = &corev1.ResourceRequirements{Limits: rl("cpu", "1", "memory", "2Gi")}
		}, want: &runtimeapi.LinuxContainerResources{CpuShares: 102, CpuQuota: 100000, CpuPeriod: 100000, MemoryLimitInBytes: 2 * gi, OomScoreAdj: 1000 - 1}},
		{name: "huge pages: host sizes listed, asked sizes limited", pod: func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources = resources(rl("cpu", "1", "memory", "1Gi", "hugepages-2Mi", "100Mi"), rl("cpu", "1", "memory", "1Gi", "hugepages-2Mi", "100Mi"))
		}, opts: func(o *ContainerOptions) { o.HugePageSizes = []int64{2 << 20, 1 << 30} },
			want: &runtimeapi.LinuxContainerResources{CpuShares: 1024, CpuQuota: 100000, CpuPeriod: 100000, MemoryLimitInBytes: gi, OomScoreAdj: -997,
				HugepageLimits: []*runtimeapi.HugepageLimit{{PageSize: "2MB", Limit: 100 << 20}, {PageSize: "1GB"}}}},
		{name: "huge pages: a zero limit for each host size not asked for", opts: func(o *ContainerOptions) { o.HugePageSizes = []int64{2 << 20, 1 << 30} },
			want: &runtimeapi.LinuxContainerResources{CpuShares: 102, CpuQuota: 20000, CpuPeriod: 100000, MemoryLimitInBytes: 128 << 20, OomScoreAdj: 985,
				HugepageLimits: []*runtimeapi.HugepageLimit{{PageSize: "2MB"}, {PageSize: "1GB"}}}},
		{name: "huge pages: a size the host lacks is left out", pod: func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Limits["hugepages-1Gi"] = resource.MustParse("2Gi")
		}, opts: func(o *ContainerOptions) { o.HugePageSizes = []int64{2 << 20} },
			want: &runtimeapi.LinuxContainerResources{CpuShares: 102, CpuQuota: 20000, CpuPeriod: 100000, MemoryLimitInBytes: 128 << 20, OomScoreAdj: 985,
				HugepageLimits: []*runtimeapi.HugepageLimit{{PageSize: "2MB"}}}},
		{name: "huge pages: the host has none", opts: func(o *ContainerOptions) { o.HugePageSizes = []int64{} },
			want: &runtimeapi.LinuxContainerResources{CpuShares: 102, CpuQuota: 20000, CpuPeriod: 100000, MemoryLimitInBytes: 128 << 20, OomScoreAdj: 985}},
		{name: "huge pages without host sizes", pod: func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Limits["hugepages-1Gi"] = resource.MustParse("2Gi")
		}, want: &runtimeapi.LinuxContainerResources{CpuShares: 102, CpuQuota: 20000, CpuPeriod: 100000, MemoryLimitInBytes: 128 << 20, OomScoreAdj: 985,
			HugepageLimits: []*runtimeapi.HugepageLimit{{PageSize: "1GB", Limit: 2 * gi}}}},
		{name: "cgroup v2: group OOM kill, memory.high reset", opts: func(o *ContainerOptions) { o.CgroupV2 = true },
			want: &runtimeapi.LinuxContainerResources{CpuShares: 102, CpuQuota: 20000, CpuPeriod: 100000, MemoryLimitInBytes: 128 << 20, OomScoreAdj: 985,
				Unified: map[string]string{"memory.oom.group": "1", "memory.high": "max"}}},
		{name: "cgroup v2, single process OOM kill", opts: func(o *ContainerOptions) { o.CgroupV2, o.SingleProcessOOMKill = true, true },
			want: &runtimeapi.LinuxContainerResources{CpuShares: 102, CpuQuota: 20000, CpuPeriod: 100000, MemoryLimitInBytes: 128 << 20, OomScoreAdj: 985,
				Unified: map[string]string{"memory.high": "max"}}},
		{name: "node-critical static pod", pod: func(p *corev1.Pod) {
			p.Annotations[podrules.ConfigSourceAnnotation] = "file"
			p.Spec.PriorityClassName = "system-node-critical"
		}, want: &runtimeapi.LinuxContainerResources{CpuShares: 102, CpuQuota: 20000, CpuPeriod: 100000, MemoryLimitInBytes: 128 << 20, OomScoreAdj: -997}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod, opts := testPod(), containerOpts()
			if tt.pod != nil {
				tt.pod(pod)
			}
			if tt.opts != nil {
				tt.opts(&opts)
			}
			cfg, err := ContainerConfig(pod, &pod.Spec.Containers[0], runtime.KindRegular, 0, opts)
			if err != nil {
				t.Fatal(err)
			}
			assertProto(t, cfg.Linux.Resources, tt.want)
		})
	}
}

func TestContainerSecurityContext(t *testing.T) {
	root := "/var/lib/nodelet/seccomp"
	tests := []struct {
		name   string
		pod    func(*corev1.Pod, *corev1.Container)
		opts   func(*ContainerOptions)
		check  func(t *testing.T, sc *runtimeapi.LinuxContainerSecurityContext)
		errMsg string
	}{
		{name: "pod-level user and group, container overrides the user", pod: func(p *corev1.Pod, c *corev1.Container) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1000), RunAsGroup: ptr.To[int64](3000),
				FSGroup: ptr.To[int64](2000), SupplementalGroups: []int64{5000, 6000},
				SupplementalGroupsPolicy: ptr.To(corev1.SupplementalGroupsPolicyStrict)}
			c.SecurityContext = &corev1.SecurityContext{RunAsUser: ptr.To[int64](1001)}
		}, check: func(t *testing.T, sc *runtimeapi.LinuxContainerSecurityContext) {
			assertProto(t, sc.RunAsUser, &runtimeapi.Int64Value{Value: 1001})
			assertProto(t, sc.RunAsGroup, &runtimeapi.Int64Value{Value: 3000})
			if got := sc.SupplementalGroups; len(got) != 3 || got[0] != 2000 || got[1] != 5000 || got[2] != 6000 {
				t.Errorf("supplemental groups %v, want fsGroup then the pod's", got)
			}
			if sc.SupplementalGroupsPolicy != runtimeapi.SupplementalGroupsPolicy_Strict {
				t.Errorf("policy %v", sc.SupplementalGroupsPolicy)
			}
		}},
		{name: "image user applies only without runAsUser", opts: func(o *ContainerOptions) { o.ImageUID = ptr.To[int64](65534) },
			check: func(t *testing.T, sc *runtimeapi.LinuxContainerSecurityContext) {
				assertProto(t, sc.RunAsUser, &runtimeapi.Int64Value{Value: 65534})
			}},
		{name: "non-numeric image user", opts: func(o *ContainerOptions) { o.ImageUsername = "nobody" },
			check: func(t *testing.T, sc *runtimeapi.LinuxContainerSecurityContext) {
				if sc.RunAsUser != nil || sc.RunAsUsername != "nobody" {
					t.Errorf("runAsUser %v username %q", sc.RunAsUser, sc.RunAsUsername)
				}
			}},
		{name: "privileged, capabilities, read-only rootfs, no new privileges", pod: func(_ *corev1.Pod, c *corev1.Container) {
			c.SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true), ReadOnlyRootFilesystem: ptr.To(true),
				AllowPrivilegeEscalation: ptr.To(false),
				Capabilities:             &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN"}, Drop: []corev1.Capability{"ALL"}}}
		}, check: func(t *testing.T, sc *runtimeapi.LinuxContainerSecurityContext) {
			if !sc.Privileged || !sc.ReadonlyRootfs || !sc.NoNewPrivs {
				t.Errorf("privileged %v readonly %v noNewPrivs %v", sc.Privileged, sc.ReadonlyRootfs, sc.NoNewPrivs)
			}
			assertProto(t, sc.Capabilities, &runtimeapi.Capability{AddCapabilities: []string{"NET_ADMIN"}, DropCapabilities: []string{"ALL"}})
		}},
		{name: "allowPrivilegeEscalation unset: privileges may grow", check: func(t *testing.T, sc *runtimeapi.LinuxContainerSecurityContext) {
			if sc.NoNewPrivs {
				t.Error("noNewPrivs set")
			}
		}},
		{name: "seccomp default with SeccompDefault", opts: func(o *ContainerOptions) { o.SeccompDefault = true },
			check: func(t *testing.T, sc *runtimeapi.LinuxContainerSecurityContext) {
				assertProto(t, sc.Seccomp, &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault})
			}},
		{name: "seccomp from the pod", pod: func(p *corev1.Pod, _ *corev1.Container) {
			p.Spec.SecurityContext.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To("profiles/audit.json")}
		}, opts: func(o *ContainerOptions) { o.SeccompProfileRoot = root }, check: func(t *testing.T, sc *runtimeapi.LinuxContainerSecurityContext) {
			assertProto(t, sc.Seccomp, &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: root + "/profiles/audit.json"})
		}},
		{name: "container seccomp wins", pod: func(p *corev1.Pod, c *corev1.Container) {
			p.Spec.SecurityContext.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
			c.SecurityContext = &corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}}
		}, opts: func(o *ContainerOptions) { o.SeccompDefault = true }, check: func(t *testing.T, sc *runtimeapi.LinuxContainerSecurityContext) {
			assertProto(t, sc.Seccomp, &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined})
		}},
		{name: "localhost seccomp without a profile", pod: func(p *corev1.Pod, _ *corev1.Container) {
			p.Spec.SecurityContext.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost}
		}, errMsg: "localhostProfile must be set"},
		{name: "apparmor: container field, annotation, pod field", pod: func(p *corev1.Pod, c *corev1.Container) {
			p.Spec.SecurityContext.AppArmorProfile = &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}
			p.Annotations[corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix+"app"] = "localhost/k8s-nginx"
		}, check: func(t *testing.T, sc *runtimeapi.LinuxContainerSecurityContext) {
			assertProto(t, sc.Apparmor, &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: "k8s-nginx"})
			if sc.ApparmorProfile != "localhost/k8s-nginx" { //nolint:staticcheck // the deprecated field is still set
				t.Errorf("deprecated profile %q", sc.ApparmorProfile) //nolint:staticcheck // idem
			}
		}},
		{name: "apparmor runtime default on the container", pod: func(p *corev1.Pod, c *corev1.Container) {
			p.Spec.SecurityContext.AppArmorProfile = &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}
			c.SecurityContext = &corev1.SecurityContext{AppArmorProfile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeRuntimeDefault}}
		}, check: func(t *testing.T, sc *runtimeapi.LinuxContainerSecurityContext) {
			assertProto(t, sc.Apparmor, &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault})
		}},
		{name: "procMount Unmasked clears masked and read-only paths", pod: func(_ *corev1.Pod, c *corev1.Container) {
			c.SecurityContext = &corev1.SecurityContext{ProcMount: ptr.To(corev1.UnmaskedProcMount)}
		}, check: func(t *testing.T, sc *runtimeapi.LinuxContainerSecurityContext) {
			if sc.MaskedPaths == nil || len(sc.MaskedPaths) != 0 || sc.ReadonlyPaths == nil || len(sc.ReadonlyPaths) != 0 {
				t.Errorf("masked %v readonly %v, want empty lists", sc.MaskedPaths, sc.ReadonlyPaths)
			}
		}},
		{name: "default masked paths", check: func(t *testing.T, sc *runtimeapi.LinuxContainerSecurityContext) {
			if len(sc.MaskedPaths) < 12 || sc.MaskedPaths[0] != "/proc/asound" || len(sc.ReadonlyPaths) != 5 {
				t.Errorf("masked %v readonly %v", sc.MaskedPaths, sc.ReadonlyPaths)
			}
		}},
		{name: "shared process namespace", pod: func(p *corev1.Pod, _ *corev1.Container) { p.Spec.ShareProcessNamespace = ptr.To(true) },
			check: func(t *testing.T, sc *runtimeapi.LinuxContainerSecurityContext) {
				assertProto(t, sc.NamespaceOptions, podNamespaces(runtimeapi.NamespaceMode_POD, runtimeapi.NamespaceMode_POD, runtimeapi.NamespaceMode_POD))
			}},
		{name: "host PID wins over sharing", pod: func(p *corev1.Pod, _ *corev1.Container) {
			p.Spec.ShareProcessNamespace, p.Spec.HostPID, p.Spec.HostNetwork = ptr.To(true), true, true
		}, check: func(t *testing.T, sc *runtimeapi.LinuxContainerSecurityContext) {
			assertProto(t, sc.NamespaceOptions, podNamespaces(runtimeapi.NamespaceMode_NODE, runtimeapi.NamespaceMode_NODE, runtimeapi.NamespaceMode_POD))
		}},
		{name: "runAsNonRoot with runAsUser 0", pod: func(p *corev1.Pod, c *corev1.Container) {
			p.Spec.SecurityContext.RunAsNonRoot = ptr.To(true)
			c.SecurityContext = &corev1.SecurityContext{RunAsUser: ptr.To[int64](0)}
		}, errMsg: `container's runAsUser breaks non-root policy (pod: "web_default(1234-abcd)", container: app)`},
		{name: "runAsNonRoot with a root image", pod: func(p *corev1.Pod, _ *corev1.Container) {
			p.Spec.SecurityContext.RunAsNonRoot = ptr.To(true)
		}, opts: func(o *ContainerOptions) { o.ImageUID = ptr.To[int64](0) }, errMsg: "image will run as root"},
		{name: "runAsNonRoot with a named image user", pod: func(p *corev1.Pod, _ *corev1.Container) {
			p.Spec.SecurityContext.RunAsNonRoot = ptr.To(true)
		}, opts: func(o *ContainerOptions) { o.ImageUsername = "app" }, errMsg: "image has non-numeric user (app)"},
		{name: "runAsNonRoot satisfied by the image", pod: func(p *corev1.Pod, _ *corev1.Container) {
			p.Spec.SecurityContext.RunAsNonRoot = ptr.To(true)
		}, opts: func(o *ContainerOptions) { o.ImageUID = ptr.To[int64](1000) }, check: func(t *testing.T, sc *runtimeapi.LinuxContainerSecurityContext) {
			assertProto(t, sc.RunAsUser, &runtimeapi.Int64Value{Value: 1000})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod, opts := testPod(), containerOpts()
			c := &pod.Spec.Containers[0]
			if tt.pod != nil {
				tt.pod(pod, c)
			}
			if tt.opts != nil {
				tt.opts(&opts)
			}
			cfg, err := ContainerConfig(pod, c, runtime.KindRegular, 0, opts)
			if tt.errMsg != "" {
				if err == nil || !strings.Contains(err.Error(), tt.errMsg) || !errors.Is(err, ErrCreateContainerConfig) {
					t.Fatalf("err = %v, want a CreateContainerConfigError containing %q", err, tt.errMsg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, cfg.Linux.SecurityContext)
		})
	}
}

func TestContainerConfigKinds(t *testing.T) {
	pod := testPod()
	pod.Spec.InitContainers = []corev1.Container{
		{Name: "setup", Image: "busybox"},
		{Name: "proxy", Image: "envoy", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)},
	}
	tests := []struct {
		c        *corev1.Container
		kind     runtime.ContainerKind
		wantInit string
		wantSide string
	}{
		{&pod.Spec.Containers[0], runtime.KindRegular, "", ""},
		{&pod.Spec.InitContainers[0], runtime.KindInit, "true", ""},
		{&pod.Spec.InitContainers[1], runtime.KindSidecar, "true", "true"},
	}
	for _, tt := range tests {
		t.Run(tt.c.Name, func(t *testing.T) {
			cfg, err := ContainerConfig(pod, tt.c, tt.kind, 1, containerOpts())
			if err != nil {
				t.Fatal(err)
			}
			a := cfg.Annotations
			if a[runtime.AnnotationContainerInit] != tt.wantInit || a[runtime.AnnotationContainerRestartableInit] != tt.wantSide ||
				a[runtime.AnnotationContainerImageSpec] != tt.c.Image || cfg.LogPath != tt.c.Name+"/1.log" {
				t.Errorf("annotations %v, log path %q", a, cfg.LogPath)
			}
		})
	}
}

func TestParseCPUList(t *testing.T) {
	tests := []struct {
		in   string
		want []int
		ok   bool
	}{
		{"0", []int{0}, true},
		{"0-3", []int{0, 1, 2, 3}, true},
		{"0-1,4,6-7", []int{0, 1, 4, 6, 7}, true},
		{"x", nil, false},
	}
	for _, tt := range tests {
		got, ok := parseCPUList(tt.in)
		if ok != tt.ok || len(got) != len(tt.want) {
			t.Errorf("parseCPUList(%q) = %v, %v", tt.in, got, ok)
		}
	}
}

func TestAPodsUserNamespaceGoesToItsSandboxContainersAndMounts(t *testing.T) {
	pod := testPod()
	pod.Spec.HostUsers = ptr.To(false)
	ids := []*runtimeapi.IDMapping{{HostId: 196608, ContainerId: 0, Length: 65536}}
	userns := &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_POD, Uids: ids, Gids: ids}
	sopts := sandboxOpts()
	sopts.UserNamespace = userns
	sb, err := SandboxConfig(pod, 0, sopts)
	if err != nil {
		t.Fatal(err)
	}
	if got := sb.Linux.SecurityContext.NamespaceOptions.UsernsOptions; !proto.Equal(got, userns) {
		t.Errorf("sandbox user namespace %v, want %v", got, userns)
	}
	opts := containerOpts()
	opts.UserNamespace = userns
	c, err := ContainerConfig(pod, &pod.Spec.Containers[0], runtime.KindRegular, 0, opts)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Linux.SecurityContext.NamespaceOptions.UsernsOptions; !proto.Equal(got, userns) {
		t.Errorf("container user namespace %v, want %v", got, userns)
	}
	for _, m := range c.Mounts {
		if !slices.EqualFunc(m.UidMappings, ids, eqMapping) || !slices.EqualFunc(m.GidMappings, ids, eqMapping) {
			t.Errorf("mount %s is not ID-mapped: %v %v", m.ContainerPath, m.UidMappings, m.GidMappings)
		}
	}
	if opts.Mounts[0].UidMappings != nil {
		t.Error("the caller's mount was changed")
	}
	node, err := ContainerConfig(testPod(), &pod.Spec.Containers[0], runtime.KindRegular, 0, containerOpts())
	if err != nil {
		t.Fatal(err)
	}
	if node.Linux.SecurityContext.NamespaceOptions.UsernsOptions.Mode != runtimeapi.NamespaceMode_NODE || node.Mounts[0].UidMappings != nil {
		t.Error("a pod in the node's user namespace got mappings")
	}
}

func eqMapping(a, b *runtimeapi.IDMapping) bool { return proto.Equal(a, b) }
