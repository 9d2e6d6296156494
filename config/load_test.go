package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// noticeString renders a notice as "msg k=v k=v" for matching in tests.
func noticeString(n Notice) string {
	var b strings.Builder
	b.WriteString(n.Msg)
	for i := 0; i+1 < len(n.KeysAndValues); i += 2 {
		fmt.Fprintf(&b, " %v=%v", n.KeysAndValues[i], n.KeysAndValues[i+1])
	}
	return b.String()
}

func noticeStrings(c *Config) []string {
	out := make([]string, 0, len(c.Notices))
	for _, n := range c.Notices {
		out = append(out, noticeString(n))
	}
	return out
}

// hasNotice reports whether a notice contains every one of parts.
func hasNotice(c *Config, parts ...string) bool {
	for _, n := range noticeStrings(c) {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(n, p)
		}
		if all {
			return true
		}
	}
	return false
}

func TestKubeadmAndKindCommandLines(t *testing.T) {
	dir := t.TempDir()
	cfgPath := writeFile(t, dir, "config.yaml", kubeadmConfig)
	cases := []struct {
		name  string
		args  []string
		check func(c *Config) (got, want any)
	}{
		{"kubeadm systemd drop-in and kubeadm-flags.env", []string{
			"--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf", "--kubeconfig=/etc/kubernetes/kubelet.conf",
			"--config=" + cfgPath, "--container-runtime-endpoint=unix:///var/run/containerd/containerd.sock",
			"--node-ip=192.0.2.7", "--hostname-override=node-7"},
			func(c *Config) (any, any) {
				return []any{c.BootstrapKubeconfig, c.NodeName, c.Kubelet.ContainerRuntimeEndpoint},
					[]any{"/etc/kubernetes/bootstrap-kubelet.conf", "node-7", "unix:///var/run/containerd/containerd.sock"}
			}},
		{"kind", []string{"--config=" + cfgPath, "--node-ip=172.18.0.2", "--node-labels=",
			"--provider-id=kind://docker/kind/kind-control-plane", "--runtime-cgroups=/system.slice/containerd.service",
			"--fail-swap-on=false", "--cgroup-root=/kubelet"},
			func(c *Config) (any, any) {
				return []any{c.Kubelet.ProviderID, *c.Kubelet.FailSwapOn, c.Kubelet.CgroupRoot},
					[]any{"kind://docker/kind/kind-control-plane", false, "/kubelet"}
			}},
		{"certificates, lock file and cloud provider", []string{"--cert-dir=/var/lib/kubelet/pki", "--rotate-certificates",
			"--lock-file=/var/run/kubelet.lock", "--exit-on-lock-contention", "--cloud-provider=external"},
			func(c *Config) (any, any) {
				return []any{c.CertDirectory(), c.Kubelet.RotateCertificates, c.LockFile, c.ExitOnLockContention, c.CloudProvider},
					[]any{"/var/lib/kubelet/pki", true, "/var/run/kubelet.lock", true, "external"}
			}},
		{"logging flags", []string{"--v=3", "--vmodule=pod*=4", "--logging-format=json", "--log-flush-frequency=2s",
			"--log-json-split-stream", "--log-json-info-buffer-size=1Ki"},
			func(c *Config) (any, any) {
				l := c.Kubelet.Logging
				return []any{c.Verbosity, len(l.VModule), l.Format, l.FlushFrequency.Duration.Duration, l.Options.JSON.SplitStream, l.Options.JSON.InfoBufferSize.Value()},
					[]any{3, 1, "json", 2 * time.Second, true, int64(1024)}
			}},
		{"deprecated and cAdvisor flags", []string{"--maximum-dead-containers=10", "--minimum-container-ttl-duration=1m",
			"--housekeeping-interval=5s", "--experimental-allocatable-ignore-eviction"},
			func(c *Config) (any, any) {
				return []any{c.Kubelet.MaxPods, c.MaxContainerCount, c.MinimumGCAge, c.MaxPerPodContainerCount},
					[]any{int32(110), int32(10), time.Minute, int32(1)}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := loadT(tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := tc.check(c); !reflect.DeepEqual(got, want) {
				t.Errorf("got %v, want %v", got, want)
			}
		})
	}
}

func TestConfigFlags(t *testing.T) {
	cases := []struct {
		name  string
		file  string
		args  []string
		check func(k *kubeletconfigv1beta1.KubeletConfiguration) (got, want any)
	}{
		{"feature gates add to the file's", "featureGates:\n  A: true\n  B: true\n", []string{"--feature-gates=B=false,C=true"},
			func(k *kubeletconfigv1beta1.KubeletConfiguration) (any, any) {
				return k.FeatureGates, map[string]bool{"A": true, "B": false, "C": true}
			}},
		{"node status max images", "", []string{"--node-status-max-images=-1"},
			func(k *kubeletconfigv1beta1.KubeletConfiguration) (any, any) {
				return *k.NodeStatusMaxImages, int32(-1)
			}},
		{"resolv-conf empty", "", []string{"--resolv-conf="},
			func(k *kubeletconfigv1beta1.KubeletConfiguration) (any, any) { return *k.ResolverConfig, "" }},
		{"seccomp-default true wins", "seccompDefault: false\n", []string{"--seccomp-default"},
			func(k *kubeletconfigv1beta1.KubeletConfiguration) (any, any) { return *k.SeccompDefault, true }},
		{"seccomp-default false keeps the file", "seccompDefault: true\n", []string{"--seccomp-default=false"},
			func(k *kubeletconfigv1beta1.KubeletConfiguration) (any, any) { return *k.SeccompDefault, true }},
		{"cpu manager options are not split", "", []string{"--cpu-manager-policy-options=a=b,c"},
			func(k *kubeletconfigv1beta1.KubeletConfiguration) (any, any) {
				return k.CPUManagerPolicyOptions, map[string]string{"a": "b,c"}
			}},
		{"reserved memory per NUMA node", "", []string{"--reserved-memory=0:memory=1Gi,hugepages-1M=2Gi", "--reserved-memory=1:memory=2Gi"},
			func(k *kubeletconfigv1beta1.KubeletConfiguration) (any, any) {
				return k.ReservedMemory, []kubeletconfigv1beta1.MemoryReservation{
					{NumaNode: 0, Limits: corev1.ResourceList{"memory": resource.MustParse("1Gi"), "hugepages-1M": resource.MustParse("2Gi")}},
					{NumaNode: 1, Limits: corev1.ResourceList{"memory": resource.MustParse("2Gi")}}}
			}},
		{"pointer flags", "", []string{"--pod-max-pids=4096", "--cpu-cfs-quota-period=50ms", "--registry-qps=0", "--oom-score-adj=-500"},
			func(k *kubeletconfigv1beta1.KubeletConfiguration) (any, any) {
				return []any{*k.PodPidsLimit, k.CPUCFSQuotaPeriod.Duration, *k.RegistryPullQPS, *k.OOMScoreAdj},
					[]any{int64(4096), 50 * time.Millisecond, int32(0), int32(-500)}
			}},
		{"verbosity from the file", "logging:\n  verbosity: 4\n", nil,
			func(k *kubeletconfigv1beta1.KubeletConfiguration) (any, any) { return int(k.Logging.Verbosity), 4 }},
		{"-v over the file", "logging:\n  verbosity: 4\n", []string{"-v", "1"},
			func(k *kubeletconfigv1beta1.KubeletConfiguration) (any, any) { return int(k.Logging.Verbosity), 1 }},
		{"eviction soft with grace period", "", []string{"--eviction-soft=memory.available<1Gi", "--eviction-soft-grace-period=memory.available=1m"},
			func(k *kubeletconfigv1beta1.KubeletConfiguration) (any, any) {
				return []any{k.EvictionSoft, k.EvictionSoftGracePeriod}, []any{map[string]string{"memory.available": "1Gi"}, map[string]string{"memory.available": "1m"}}
			}},
		{"absent flags keep the file", "cgroupRoot: /pods\nproviderID: p1\n", []string{"--max-pods=10"},
			func(k *kubeletconfigv1beta1.KubeletConfiguration) (any, any) {
				return []any{k.CgroupRoot, k.ProviderID, k.MaxPods}, []any{"/pods", "p1", int32(10)}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := mustLoadFile(t, header+tc.file, tc.args...)
			if got, want := tc.check(&c.Kubelet); !reflect.DeepEqual(got, want) {
				t.Errorf("got %v, want %v", got, want)
			}
			if c.Verbosity != int(c.Kubelet.Logging.Verbosity) {
				t.Errorf("Verbosity %d != logging.verbosity %d", c.Verbosity, c.Kubelet.Logging.Verbosity)
			}
		})
	}
}

func TestVersionFlag(t *testing.T) {
	for _, arg := range []string{"--version", "--version=raw"} {
		_, err := loadT(arg, "--config=/does/not/exist.yaml")
		if !errors.Is(err, ErrVersion) {
			t.Errorf("%s: err = %v, want ErrVersion", arg, err)
		}
	}
	if _, err := loadT("--version=false"); err != nil {
		t.Errorf("--version=false: %v", err)
	}
}

func TestLenientDecoding(t *testing.T) {
	cases := []struct {
		name, body, warning string
		check               func(k *kubeletconfigv1beta1.KubeletConfiguration) (got, want any)
	}{
		{"unknown field", "maxPodz: 3\nmaxPods: 7\n", `unknown field "maxPodz"`,
			func(k *kubeletconfigv1beta1.KubeletConfiguration) (any, any) { return k.MaxPods, int32(7) }},
		{"unknown nested field", "authentication:\n  x509:\n    clientCA: /x\n    clientCAFile: /ca.crt\n", "authentication.x509.clientCA",
			func(k *kubeletconfigv1beta1.KubeletConfiguration) (any, any) {
				return k.Authentication.X509.ClientCAFile, "/ca.crt"
			}},
		{"field of a newer kubelet", "someFutureSetting: {enabled: true}\nport: 10251\n", "someFutureSetting",
			func(k *kubeletconfigv1beta1.KubeletConfiguration) (any, any) { return k.Port, int32(10251) }},
		{"duplicate field", "maxPods: 3\nmaxPods: 4\n", `"maxPods"`,
			func(k *kubeletconfigv1beta1.KubeletConfiguration) (any, any) { return k.MaxPods, int32(4) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := mustLoadFile(t, header+tc.body)
			if got, want := tc.check(&c.Kubelet); !reflect.DeepEqual(got, want) {
				t.Errorf("got %v, want %v", got, want)
			}
			if !hasNotice(c, MsgLenientDecoding, "config.yaml", tc.warning) {
				t.Errorf("no lenient decoding notice naming %q in %q", tc.warning, noticeStrings(c))
			}
		})
	}
	t.Run("json duplicate", func(t *testing.T) {
		kc, warnings, err := Decode([]byte(`{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"KubeletConfiguration","port":1,"port":2}`))
		if err != nil || kc.Port != 2 || len(warnings) != 1 || !strings.Contains(warnings[0], `duplicate field "port"`) {
			t.Errorf("Decode = %v, %q, %v; want port 2 and a duplicate field warning", kc, warnings, err)
		}
	})
	t.Run("strict file has no warning", func(t *testing.T) {
		c := mustLoadFile(t, kubeadmConfig)
		if hasNotice(c, MsgLenientDecoding) {
			t.Errorf("unexpected notice: %q", noticeStrings(c))
		}
	})
}

func TestNotices(t *testing.T) {
	cases := []struct {
		name    string
		file    string
		args    []string
		want    [][]string // each: parts of one notice
		notWant [][]string
	}{
		{"kubeadm config", kubeadmConfig, nil, nil,
			[][]string{{"rotateCertificates"}, {"cgroupDriver"}, {"clusterDNS"}, {"field=logging"}, {"memorySwap"}, {"shutdownGracePeriod"}, {"failSwapOn"}}},
		{"every unimplemented field is reported whatever its value", "", nil,
			[][]string{{MsgFieldNoEffect, "field=streamingConnectionIdleTimeout", `value="4h0m0s"`}, {MsgFieldNoEffect, "field=registryPullQPS", "value=5"},
				{MsgFieldNoEffect, "field=cpuManagerPolicy", `value="none"`}, {MsgFieldNoEffect, "field=makeIPTablesUtilChains", "value=true"}},
			[][]string{{"field=failSwapOn"}, {"field=localStorageCapacityIsolation"}, {"field=enforceNodeAllocatable"}, {"field=memorySwap"},
				{"field=singleProcessOOMKill"}, {"field=serializeImagePulls"}, {"field=userNamespaces"}}},
		{"unimplemented fields at non-default values", header + "eventRecordQPS: 7\nregistryPullQPS: 10\nlogging:\n  format: json\n  verbosity: 2\nhairpinMode: hairpin-veth\n", nil,
			[][]string{{MsgFieldNoEffect, "field=eventRecordQPS", "value=7"}, {"field=registryPullQPS", "value=10"},
				{"field=logging.format", `value="json"`}, {"field=hairpinMode", `value="hairpin-veth"`}},
			[][]string{{"logging.verbosity"}}},
		{"fields whose default is nodelet's behaviour are quiet at the default", header + "registerNode: true\nshutdownGracePeriod: 0s\ncpuCFSQuota: true\n", nil,
			nil, [][]string{{"field=registerNode"}, {"field=shutdownGracePeriod"}, {"field=cpuCFSQuota"}, {"field=logging"}}},
		{"implemented fields are quiet", header + "maxPods: 50\ncgroupRoot: /pods\nproviderID: p\nstaticPodPath: /etc/kubernetes/manifests\n" +
			"imageGCHighThresholdPercent: 90\nimageGCLowThresholdPercent: 70\nimageMinimumGCAge: 1m\nimageMaximumGCAge: 24h\n" +
			"enforceNodeAllocatable: [pods]\nfailSwapOn: false\nlocalStorageCapacityIsolation: false\nserializeImagePulls: false\n", nil,
			nil, [][]string{{"field=maxPods"}, {"field=cgroupRoot"}, {"field=providerID"}, {"field=staticPodPath"}, {"field=imageGC"},
				{"field=imageM"}, {"field=enforceNodeAllocatable"}, {"field=failSwapOn"}, {"field=localStorageCapacityIsolation"},
				{"field=serializeImagePulls"}, {MsgFlagNoEffect}}},
		{"config flag for an unimplemented field, once", header + "registryBurst: 20\n", []string{"--registry-burst=30", "--registry-qps=10"},
			[][]string{{MsgFlagNoEffect, "flag=--registry-burst", "value=30", "field=registryBurst"}, {MsgFlagNoEffect, "flag=--registry-qps", "field=registryPullQPS"}},
			[][]string{{MsgFieldNoEffect, "registryBurst"}, {MsgFieldNoEffect, "registryPullQPS"}}},
		{"implemented flags are quiet", "", []string{"--max-pods=20", "--image-gc-high-threshold=90", "--provider-id=x", "--cgroup-root=/k", "-v=2", "--node-status-max-images=5", "--cluster-dns=10.0.0.10", "--cluster-domain=c.local", "--resolv-conf=/r"},
			nil, [][]string{{MsgFlagNoEffect}, {"field=maxPods"}, {"field=clusterD"}, {"field=resolvConf"}, {"field=nodeStatusMaxImages"}}},
		{"flags outside the config", "", []string{"--runtime-cgroups=/system.slice/containerd.service", "--cloud-provider=external", "--maximum-dead-containers=3",
			"--pod-infra-container-image=registry.k8s.io/pause:3.9"},
			[][]string{{MsgFlagNoEffect, "flag=--runtime-cgroups", "value=/system.slice/containerd.service", "reason="},
				{MsgFlagNoEffect, "flag=--pod-infra-container-image", "v1.35"},
				{MsgFlagNoEffect, "flag=--cloud-provider", "value=external"},
				{MsgFlagDeprecated, "flag=--maximum-dead-containers", "value=3", "reason=Use --eviction-hard or --eviction-soft instead. Will be removed in a future version."}},
			[][]string{{MsgFlagNoEffect, "flag=--maximum-dead-containers"}}},
		{"container gc flags are deprecated, not without effect", "", []string{"--minimum-container-ttl-duration=10s",
			"--maximum-dead-containers-per-container=2", "--maximum-dead-containers=100"},
			[][]string{{MsgFlagDeprecated, "flag=--minimum-container-ttl-duration", "value=10s", "--eviction-hard"},
				{MsgFlagDeprecated, "flag=--maximum-dead-containers-per-container", "value=2"},
				{MsgFlagDeprecated, "flag=--maximum-dead-containers", "value=100"}},
			[][]string{{MsgFlagNoEffect}}},
		{"container gc flags not given are quiet", "", nil, nil, [][]string{{MsgFlagDeprecated}}},
		{"no cloud provider is quiet", "", []string{"--cloud-provider="}, nil, [][]string{{"cloud-provider"}}},
		{"node credential flags are implemented: quiet", "", []string{"--bootstrap-kubeconfig=/b.conf", "--cert-dir=/pki", "--lock-file=/l", "--exit-on-lock-contention"},
			nil, [][]string{{"flag=--bootstrap-kubeconfig"}, {"flag=--cert-dir"}, {"flag=--lock-file"}, {"flag=--exit-on-lock-contention"}}},
		{"feature gates", header + "featureGates:\n  A: true\n", []string{"--feature-gates=B=false"},
			[][]string{{MsgFeatureGates, "A:true", "B:false"}}, [][]string{{MsgFlagNoEffect}, {"field=featureGates"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var c *Config
			var err error
			if tc.file == "" {
				c, err = loadT(tc.args...)
			} else {
				c, err = loadFileT(t, tc.file, tc.args...)
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, parts := range tc.want {
				if !hasNotice(c, parts...) {
					t.Errorf("no notice with %q in %q", parts, noticeStrings(c))
				}
			}
			for _, parts := range tc.notWant {
				if hasNotice(c, parts...) {
					t.Errorf("unexpected notice with %q in %q", parts, noticeStrings(c))
				}
			}
		})
	}
}

func TestDropIns(t *testing.T) {
	type files map[string]string
	cases := []struct {
		name    string
		file    string // "" for no --config
		dropIns files
		args    []string
		check   func(c *Config) (got, want any)
		wantErr []string
	}{
		{"lexical order, later wins", header + "maxPods: 50\n", files{
			"20-pods.conf": header + "maxPods: 70\n", "10-pods.conf": header + "maxPods: 60\nport: 11250\n"}, nil,
			func(c *Config) (any, any) {
				return []any{c.Kubelet.MaxPods, c.Kubelet.Port}, []any{int32(70), int32(11250)}
			}, nil},
		{"subdirectories in lexical order", header + "maxPods: 50\n", files{
			"10-a/99.conf": header + "maxPods: 60\n", "20-b/00.conf": header + "maxPods: 80\n"}, nil,
			func(c *Config) (any, any) { return c.Kubelet.MaxPods, int32(80) }, nil},
		{"other files skipped", header + "maxPods: 50\n", files{
			"10.conf.bak": header + "maxPods: 1\n", "README": "not yaml: [", "20.conf": header + "cgroupDriver: systemd\n"}, nil,
			func(c *Config) (any, any) {
				return []any{c.Kubelet.MaxPods, c.Kubelet.CgroupDriver}, []any{int32(50), "systemd"}
			}, nil},
		{"maps merge key by key", header + "evictionHard:\n  memory.available: 500Mi\n  nodefs.available: 5%\n", files{
			"10.conf": header + "evictionHard:\n  memory.available: 1Gi\n"}, nil,
			func(c *Config) (any, any) {
				return c.Kubelet.EvictionHard, map[string]string{"memory.available": "1Gi", "nodefs.available": "5%"}
			}, nil},
		{"null removes a field, defaults return", header + "maxPods: 50\n", files{
			"10.conf": header + "maxPods: null\n"}, nil,
			func(c *Config) (any, any) { return c.Kubelet.MaxPods, int32(110) }, nil},
		{"without --config, over the defaults", "", files{"10.conf": header + "maxPods: 30\n"}, nil,
			func(c *Config) (any, any) {
				return []any{c.Kubelet.MaxPods, c.Kubelet.SyncFrequency.Duration}, []any{int32(30), time.Minute}
			}, nil},
		{"flags override drop-ins", header, files{"10.conf": header + "maxPods: 30\n"}, []string{"--max-pods=40"},
			func(c *Config) (any, any) { return c.Kubelet.MaxPods, int32(40) }, nil},
		{"unknown field in a drop-in is a notice", header, files{"10.conf": header + "maxPodz: 30\nmaxPods: 31\n"}, nil,
			func(c *Config) (any, any) {
				return []any{c.Kubelet.MaxPods, hasNotice(c, MsgLenientDecoding, "10.conf", "maxPodz")}, []any{int32(31), true}
			}, nil},
		{"unimplemented field set by a drop-in is a notice", header, files{"10.conf": header + "registryPullQPS: 9\n"}, nil,
			func(c *Config) (any, any) {
				return hasNotice(c, MsgFieldNoEffect, "field=registryPullQPS", "value=9"), true
			}, nil},
		{"drop-in without kind", header, files{"10.conf": "maxPods: 3\n"}, nil, nil, []string{"10.conf", "Kind"}},
		{"drop-in of another kind", header, files{"10.conf": "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: CredentialProviderConfig\n"}, nil, nil,
			[]string{"10.conf", "CredentialProviderConfig"}},
		{"drop-in with a wrong type", header, files{"10.conf": header + "syncFrequency: soon\n"}, nil, nil, []string{"10.conf", `"syncFrequency"`}},
		{"invalid value from a drop-in", header, files{"10.conf": header + "port: 70000\n"}, nil, nil, []string{"port", "70000"}},
		{"empty drop-in", header, files{"10.conf": ""}, nil, nil, []string{"10.conf", "empty"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			dropIns := filepath.Join(dir, "kubelet.conf.d")
			if err := os.MkdirAll(dropIns, 0o755); err != nil {
				t.Fatal(err)
			}
			for name, content := range tc.dropIns {
				writeFile(t, dropIns, name, content)
			}
			args := append([]string{"--config-dir", dropIns}, tc.args...)
			if tc.file != "" {
				args = append(args, "--config", writeFile(t, dir, "config.yaml", tc.file))
			}
			c, err := loadT(args...)
			if tc.wantErr != nil {
				wantErrContains(t, err, tc.wantErr...)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got, want := tc.check(c); !reflect.DeepEqual(got, want) {
				t.Errorf("got %v, want %v", got, want)
			}
		})
	}
	t.Run("missing directory", func(t *testing.T) {
		_, err := loadT("--config-dir", filepath.Join(t.TempDir(), "nope"))
		wantErrContains(t, err, "nope")
	})
}

func TestMergePatch(t *testing.T) {
	cases := []struct {
		name                string
		target, patch, want map[string]any
	}{
		{"replace scalar", map[string]any{"a": 1.0}, map[string]any{"a": 2.0}, map[string]any{"a": 2.0}},
		{"add", map[string]any{"a": 1.0}, map[string]any{"b": "x"}, map[string]any{"a": 1.0, "b": "x"}},
		{"null removes", map[string]any{"a": 1.0, "b": 2.0}, map[string]any{"a": nil}, map[string]any{"b": 2.0}},
		{"objects merge", map[string]any{"m": map[string]any{"x": 1.0, "y": 2.0}}, map[string]any{"m": map[string]any{"y": 3.0, "x": nil}},
			map[string]any{"m": map[string]any{"y": 3.0}}},
		{"object replaces scalar", map[string]any{"m": 1.0}, map[string]any{"m": map[string]any{"x": 1.0}}, map[string]any{"m": map[string]any{"x": 1.0}}},
		{"lists replace", map[string]any{"l": []any{1.0, 2.0}}, map[string]any{"l": []any{3.0}}, map[string]any{"l": []any{3.0}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := mergePatch(tc.target, tc.patch); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// TestDocsListUnimplementedFields keeps docs/config.md honest: every KubeletConfiguration field nodelet
// does not act on is listed there.
func TestDocsListUnimplementedFields(t *testing.T) {
	doc, err := os.ReadFile("../docs/config.md")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d fields not implemented", len(unimplementedFields()))
	for _, name := range unimplementedFields() {
		if !strings.Contains(string(doc), "`"+name+"`") {
			t.Errorf("docs/config.md does not list the unimplemented field %q", name)
		}
	}
}

// unimplementedFields lists the top-level KubeletConfiguration fields nodelet does not fully act on.
func unimplementedFields() []string {
	var out []string
	t := reflect.TypeOf(kubeletconfigv1beta1.KubeletConfiguration{})
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && !implemented(name) {
			out = append(out, name)
		}
	}
	return out
}

func TestFlagzListsTheCommandLine(t *testing.T) {
	c := mustLoadFile(t, header+"maxPods: 50\n", "--node-ip=192.0.2.7", "--hostname-override=node-7")
	flags := c.Flagz()
	for name, want := range map[string]string{
		"node-ip":              "192.0.2.7",
		"hostname-override":    "node-7",
		"max-pods":             "50", // the effective value: from the file, the flag not given
		"contention-profiling": "false",
	} {
		if got, ok := flags[name]; !ok || got != want {
			t.Errorf("Flagz()[%q] = %q (listed %v), want %q", name, got, ok, want)
		}
	}
	for name := range removedFlags {
		if _, ok := flags[name]; ok {
			t.Errorf("Flagz lists %q, a flag the kubelet removed", name)
		}
	}
	if got := Default("node-a").Flagz(); got != nil {
		t.Errorf("Flagz of a Config built in code = %v, want nil (no /flagz)", got)
	}
}

func TestZPageGates(t *testing.T) {
	for _, tt := range []struct {
		gates          map[string]bool
		flagz, statusz bool
	}{
		{nil, true, true}, // beta, on by default since v1.36
		{map[string]bool{"ComponentFlagz": false}, false, true},
		{map[string]bool{"ComponentStatusz": false, "ComponentFlagz": true}, true, false},
	} {
		k := &kubeletconfigv1beta1.KubeletConfiguration{FeatureGates: tt.gates}
		if ComponentFlagz(k) != tt.flagz || ComponentStatusz(k) != tt.statusz {
			t.Errorf("gates %v: flagz %v statusz %v, want %v %v", tt.gates, ComponentFlagz(k), ComponentStatusz(k), tt.flagz, tt.statusz)
		}
	}
}
