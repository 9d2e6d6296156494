package config

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
)

const header = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"

// kubeadmConfig is what kubeadm writes to /var/lib/kubelet/config.yaml.
const kubeadmConfig = header + `authentication:
  anonymous:
    enabled: false
  webhook:
    cacheTTL: 0s
    enabled: true
  x509:
    clientCAFile: /etc/kubernetes/pki/ca.crt
authorization:
  mode: Webhook
  webhook:
    cacheAuthorizedTTL: 0s
    cacheUnauthorizedTTL: 0s
cgroupDriver: systemd
clusterDNS:
- 10.96.0.10
clusterDomain: cluster.local
containerRuntimeEndpoint: ""
cpuManagerReconcilePeriod: 0s
evictionPressureTransitionPeriod: 0s
fileCheckFrequency: 0s
healthzBindAddress: 127.0.0.1
healthzPort: 10248
httpCheckFrequency: 0s
imageMaximumGCAge: 0s
imageMinimumGCAge: 0s
logging:
  flushFrequency: 0
  options:
    json:
      infoBufferSize: "0"
    text:
      infoBufferSize: "0"
  verbosity: 0
memorySwap: {}
nodeStatusReportFrequency: 0s
nodeStatusUpdateFrequency: 0s
rotateCertificates: true
runtimeRequestTimeout: 0s
shutdownGracePeriod: 0s
shutdownGracePeriodCriticalPods: 0s
staticPodPath: /etc/kubernetes/manifests
streamingConnectionIdleTimeout: 0s
syncFrequency: 0s
volumeStatsAggPeriod: 0s
`

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func fakeHostname() (string, error) { return "Test-Node", nil }

// loadT runs Load with a fixed host name and discarded usage output.
func loadT(args ...string) (*Config, error) {
	return load(args, io.Discard, fakeHostname)
}

// loadFileT writes content to a temp config file and loads it plus args.
func loadFileT(t *testing.T, content string, args ...string) (*Config, error) {
	t.Helper()
	path := writeFile(t, t.TempDir(), "config.yaml", content)
	return loadT(append([]string{"--config", path}, args...)...)
}

func mustLoadFile(t *testing.T, content string, args ...string) *Config {
	t.Helper()
	c, err := loadFileT(t, content, args...)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	return c
}

func wantErrContains(t *testing.T, err error, subs ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("expected an error containing %q, got nil", subs)
	}
	for _, s := range subs {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not contain %q", err, s)
		}
	}
}

func TestLoadKubeadmConfig(t *testing.T) {
	jsonConfig := `{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"KubeletConfiguration",
		"cgroupDriver":"systemd","clusterDNS":["10.96.0.10"],"clusterDomain":"cluster.local",
		"staticPodPath":"/etc/kubernetes/manifests","rotateCertificates":true,
		"authentication":{"x509":{"clientCAFile":"/etc/kubernetes/pki/ca.crt"},"webhook":{"enabled":true}},
		"authorization":{"mode":"Webhook"}}`
	for name, content := range map[string]string{"yaml": kubeadmConfig, "json": jsonConfig} {
		t.Run(name, func(t *testing.T) {
			c := mustLoadFile(t, content, "--kubeconfig", "/etc/kubernetes/kubelet.conf")
			k := c.Kubelet
			checks := []struct {
				name      string
				got, want any
			}{
				{"cgroupDriver", k.CgroupDriver, "systemd"},
				{"clusterDNS", k.ClusterDNS, []string{"10.96.0.10"}},
				{"clusterDomain", k.ClusterDomain, "cluster.local"},
				{"staticPodPath", k.StaticPodPath, "/etc/kubernetes/manifests"},
				{"clientCAFile", k.Authentication.X509.ClientCAFile, "/etc/kubernetes/pki/ca.crt"},
				{"rotateCertificates", k.RotateCertificates, true},
				{"webhook.enabled", *k.Authentication.Webhook.Enabled, true},
				{"anonymous.enabled", *k.Authentication.Anonymous.Enabled, false},
				{"webhook.cacheTTL", k.Authentication.Webhook.CacheTTL.Duration, 2 * time.Minute},
				{"authorization.mode", k.Authorization.Mode, kubeletconfigv1beta1.KubeletAuthorizationModeWebhook},
				{"cacheAuthorizedTTL", k.Authorization.Webhook.CacheAuthorizedTTL.Duration, 5 * time.Minute},
				{"syncFrequency", k.SyncFrequency.Duration, time.Minute},
				{"nodeStatusUpdateFrequency", k.NodeStatusUpdateFrequency.Duration, 10 * time.Second},
				{"nodeStatusReportFrequency", k.NodeStatusReportFrequency.Duration, 5 * time.Minute},
				{"port", k.Port, int32(10250)},
				{"maxPods", k.MaxPods, int32(110)},
				{"containerRuntimeEndpoint", k.ContainerRuntimeEndpoint, DefaultContainerRuntimeEndpoint},
				{"evictionHard", k.EvictionHard, DefaultEvictionHard()},
				{"kubeconfig", c.Kubeconfig, "/etc/kubernetes/kubelet.conf"},
				{"rootDir", c.RootDir, DefaultRootDir},
				{"metricsBindAddress", c.MetricsBindAddress, "0"}, // no unauthenticated metrics listener unless asked for
				{"hostname", c.Hostname, "test-node"},
				{"nodeName", c.NodeName, "test-node"},
			}
			for _, ch := range checks {
				if !reflect.DeepEqual(ch.got, ch.want) {
					t.Errorf("%s = %v, want %v", ch.name, ch.got, ch.want)
				}
			}
		})
	}
}

func TestLoadWithoutConfigFileUsesDefaults(t *testing.T) {
	c, err := loadT()
	if err != nil {
		t.Fatal(err)
	}
	if c.ConfigFile != "" || c.Kubeconfig != "" {
		t.Errorf("ConfigFile/Kubeconfig = %q/%q, want empty", c.ConfigFile, c.Kubeconfig)
	}
	want := kubeletconfigv1beta1.KubeletConfiguration{}
	SetDefaults(&want)
	if !reflect.DeepEqual(c.Kubelet, want) {
		t.Errorf("kubelet config without --config is not the defaulted empty config")
	}
}

func TestLoadFileErrors(t *testing.T) {
	cases := []struct {
		name    string
		content string
		want    []string
	}{
		{"malformed yaml", header + "maxPods: [3\n", []string{"decoding"}},
		{"wrong type", header + "maxPods: many\n", []string{`"maxPods"`}},
		{"wrong type beside unknown field", header + "maxPodz: 1\nport: high\n", []string{`"port"`}},
		{"wrong kind", "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeProxyConfiguration\n", []string{"KubeProxyConfiguration"}},
		{"other registered kind", "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: CredentialProviderConfig\n", []string{"CredentialProviderConfig", "want KubeletConfiguration"}},
		{"wrong apiVersion", "apiVersion: kubelet.config.k8s.io/v1alpha1\nkind: KubeletConfiguration\n", []string{"kubelet.config.k8s.io/v1alpha1"}},
		{"missing apiVersion", "kind: KubeletConfiguration\nmaxPods: 3\n", []string{"apiVersion"}},
		{"empty file", "", []string{"empty"}},
		{"undecodable duration", header + "syncFrequency: soon\n", []string{`"syncFrequency"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, t.TempDir(), "config.yaml", tc.content)
			_, _, err := LoadFile(path)
			wantErrContains(t, err, tc.want...)
			_, err = loadT("--config", path)
			wantErrContains(t, err, tc.want...)
		})
	}
	t.Run("missing file", func(t *testing.T) {
		_, err := loadT("--config", filepath.Join(t.TempDir(), "nope.yaml"))
		wantErrContains(t, err, "nope.yaml")
	})
}

func TestValidationErrors(t *testing.T) {
	cases := []struct {
		name string
		body string
		want []string
	}{
		{"negative update frequency", "nodeStatusUpdateFrequency: -1s\n", []string{"nodeStatusUpdateFrequency"}},
		{"negative sync frequency", "syncFrequency: -5s\n", []string{"syncFrequency"}},
		{"negative runtime timeout", "runtimeRequestTimeout: -1m\n", []string{"runtimeRequestTimeout"}},
		{"bad eviction quantity", "evictionHard:\n  memory.available: lots\n", []string{"evictionHard[memory.available]", "lots"}},
		{"eviction percentage over 100", "evictionHard:\n  nodefs.available: 150%\n", []string{"evictionHard[nodefs.available]"}},
		{"unknown eviction signal", "evictionHard:\n  gpu.available: 1%\n", []string{"evictionHard[gpu.available]"}},
		{"soft without grace period", "evictionSoft:\n  memory.available: 1Gi\n", []string{"evictionSoftGracePeriod[memory.available]"}},
		{"bad cgroup driver", "cgroupDriver: foo\n", []string{"cgroupDriver", "foo"}},
		{"bad swap behavior", "memorySwap:\n  swapBehavior: UnlimitedSwap\n", []string{"memorySwap.swapBehavior", "UnlimitedSwap"}},
		{"port too big", "port: 70000\n", []string{"port", "70000"}},
		{"healthz port too big", "healthzPort: 70000\n", []string{"healthzPort"}},
		{"negative max pods", "maxPods: -1\n", []string{"maxPods"}},
		{"negative lease", "nodeLeaseDurationSeconds: -1\n", []string{"nodeLeaseDurationSeconds"}},
		{"image gc low above high", "imageGCHighThresholdPercent: 50\nimageGCLowThresholdPercent: 60\n", []string{"imageGCLowThresholdPercent"}},
		{"image gc low equal to high", "imageGCHighThresholdPercent: 50\nimageGCLowThresholdPercent: 50\n",
			[]string{"imageGCLowThresholdPercent", "must be less than imageGCHighThresholdPercent (50)"}},
		{"image gc out of range", "imageGCHighThresholdPercent: 101\n", []string{"imageGCHighThresholdPercent"}},
		{"image gc negative low", "imageGCLowThresholdPercent: -1\n", []string{"imageGCLowThresholdPercent", "between 0 and 100"}},
		{"image gc negative minimum age", "imageMinimumGCAge: -1s\n", []string{"imageMinimumGCAge"}},
		{"image gc maximum age not above minimum", "imageMinimumGCAge: 5m\nimageMaximumGCAge: 5m\n",
			[]string{"imageMaximumGCAge", "must be greater than imageMinimumGCAge (5m0s)"}},
		{"image gc maximum age without its gate", "imageMaximumGCAge: 1h\nfeatureGates:\n  ImageMaximumGCAge: false\n",
			[]string{"imageMaximumGCAge", "ImageMaximumGCAge feature gate is required"}},
		{"bad authorization mode", "authorization:\n  mode: RBAC\n", []string{"authorization.mode", "RBAC"}},
		{"tcp runtime endpoint", "containerRuntimeEndpoint: tcp://127.0.0.1:1234\n", []string{"containerRuntimeEndpoint"}},
		{"relative runtime endpoint", "containerRuntimeEndpoint: unix://run/x.sock\n", []string{"containerRuntimeEndpoint"}},
		{"bad image endpoint", "imageServiceEndpoint: npipe:////./pipe/x\n", []string{"imageServiceEndpoint"}},
		{"cluster dns not ip", "clusterDNS: [kube-dns]\n", []string{"clusterDNS[0]", "kube-dns"}},
		{"bad address", "address: localhost\n", []string{"address"}},
		{"system reserved unknown resource", "systemReserved:\n  gpu: \"1\"\n", []string{"systemReserved[gpu]"}},
		{"kube reserved bad quantity", "kubeReserved:\n  memory: much\n", []string{"kubeReserved[memory]"}},
		{"taint bad effect", "registerWithTaints:\n- key: a\n  effect: Sometimes\n", []string{"registerWithTaints[0].effect", "Sometimes"}},
		{"taint bad key", "registerWithTaints:\n- key: \"a b\"\n  effect: NoSchedule\n", []string{"registerWithTaints[0].key"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadFileT(t, header+tc.body)
			wantErrContains(t, err, tc.want...)
		})
	}
}

func TestImageGCSettingsValid(t *testing.T) {
	for _, body := range []string{
		"imageGCHighThresholdPercent: 100\n",
		"imageGCHighThresholdPercent: 1\nimageGCLowThresholdPercent: 0\nimageMinimumGCAge: 1ns\n",
		"imageMinimumGCAge: 1m\nimageMaximumGCAge: 61s\n",
		"imageMaximumGCAge: 0s\nfeatureGates:\n  ImageMaximumGCAge: false\n",
	} {
		c, err := loadFileT(t, header+body)
		if err != nil {
			t.Errorf("%q: %v", body, err)
			continue
		}
		if *c.Kubelet.ImageGCHighThresholdPercent == 0 || c.Kubelet.ImageMinimumGCAge.Duration == 0 {
			t.Errorf("%q: high %d, minimum age %v", body, *c.Kubelet.ImageGCHighThresholdPercent, c.Kubelet.ImageMinimumGCAge)
		}
	}
	// imageMinimumGCAge 0 is defaulted to 2m, as by the kubelet; 1ns is kept.
	c := mustLoadFile(t, header+"imageMinimumGCAge: 1ns\n")
	if c.Kubelet.ImageMinimumGCAge.Duration != time.Nanosecond {
		t.Errorf("imageMinimumGCAge = %v, want 1ns", c.Kubelet.ImageMinimumGCAge)
	}
}

func TestValidateReportsAllErrors(t *testing.T) {
	c := newConfig()
	c.Kubelet.Port = 0
	c.Kubelet.CgroupDriver = "foo"
	err := Validate(c)
	wantErrContains(t, err, "port", "cgroupDriver")
	if c := newConfig(); Validate(c) != nil {
		t.Errorf("defaults do not validate: %v", Validate(c))
	}
}

func TestSetDefaults(t *testing.T) {
	d := func(v time.Duration) metav1.Duration { return metav1.Duration{Duration: v} }
	cases := []struct {
		name  string
		in    kubeletconfigv1beta1.KubeletConfiguration
		check func(k *kubeletconfigv1beta1.KubeletConfiguration) (got, want any)
	}{
		{"report frequency defaults to 5m", kubeletconfigv1beta1.KubeletConfiguration{},
			func(k *kubeletconfigv1beta1.KubeletConfiguration) (any, any) {
				return k.NodeStatusReportFrequency, d(5 * time.Minute)
			}},
		{"report frequency follows explicit update frequency",
			kubeletconfigv1beta1.KubeletConfiguration{NodeStatusUpdateFrequency: d(20 * time.Second)},
			func(k *kubeletconfigv1beta1.KubeletConfiguration) (any, any) {
				return k.NodeStatusReportFrequency, d(20 * time.Second)
			}},
		{"explicit report frequency kept",
			kubeletconfigv1beta1.KubeletConfiguration{NodeStatusReportFrequency: d(time.Minute)},
			func(k *kubeletconfigv1beta1.KubeletConfiguration) (any, any) {
				return k.NodeStatusReportFrequency, d(time.Minute)
			}},
		{"nil evictionHard gets defaults", kubeletconfigv1beta1.KubeletConfiguration{},
			func(k *kubeletconfigv1beta1.KubeletConfiguration) (any, any) {
				return k.EvictionHard, DefaultEvictionHard()
			}},
		{"empty evictionHard stays empty",
			kubeletconfigv1beta1.KubeletConfiguration{EvictionHard: map[string]string{}},
			func(k *kubeletconfigv1beta1.KubeletConfiguration) (any, any) { return len(k.EvictionHard), 0 }},
		{"mergeDefaultEvictionSettings merges",
			kubeletconfigv1beta1.KubeletConfiguration{EvictionHard: map[string]string{"memory.available": "1Gi"}, MergeDefaultEvictionSettings: ptrTo(true)},
			func(k *kubeletconfigv1beta1.KubeletConfiguration) (any, any) {
				return k.EvictionHard["memory.available"] + "," + k.EvictionHard["nodefs.available"], "1Gi,10%"
			}},
		{"parallel pulls disable serialization",
			kubeletconfigv1beta1.KubeletConfiguration{MaxParallelImagePulls: ptrTo[int32](3)},
			func(k *kubeletconfigv1beta1.KubeletConfiguration) (any, any) { return *k.SerializeImagePulls, false }},
		{"negative podPidsLimit becomes -1",
			kubeletconfigv1beta1.KubeletConfiguration{PodPidsLimit: ptrTo[int64](-7)},
			func(k *kubeletconfigv1beta1.KubeletConfiguration) (any, any) { return *k.PodPidsLimit, int64(-1) }},
		{"explicit false kept",
			kubeletconfigv1beta1.KubeletConfiguration{FailSwapOn: ptrTo(false)},
			func(k *kubeletconfigv1beta1.KubeletConfiguration) (any, any) { return *k.FailSwapOn, false }},
		{"gate disabled skips crashloop default",
			kubeletconfigv1beta1.KubeletConfiguration{FeatureGates: map[string]bool{gateCrashLoopBackOffMax: false}},
			func(k *kubeletconfigv1beta1.KubeletConfiguration) (any, any) {
				return k.CrashLoopBackOff.MaxContainerRestartPeriod == nil, true
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k := tc.in
			SetDefaults(&k)
			if got, want := tc.check(&k); !reflect.DeepEqual(got, want) {
				t.Errorf("got %v, want %v", got, want)
			}
		})
	}
}

func TestSetDefaultsValues(t *testing.T) {
	var k kubeletconfigv1beta1.KubeletConfiguration
	SetDefaults(&k)
	again := *k.DeepCopy()
	SetDefaults(&again)
	if !reflect.DeepEqual(k, again) {
		t.Error("SetDefaults is not idempotent")
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"fileCheckFrequency", k.FileCheckFrequency.Duration, 20 * time.Second},
		{"address", k.Address, "0.0.0.0"},
		{"readOnlyPort", k.ReadOnlyPort, int32(0)},
		{"registryPullQPS", *k.RegistryPullQPS, int32(5)},
		{"eventBurst", k.EventBurst, int32(100)},
		{"healthzPort", *k.HealthzPort, int32(10248)},
		{"oomScoreAdj", *k.OOMScoreAdj, int32(-999)},
		{"streamingConnectionIdleTimeout", k.StreamingConnectionIdleTimeout.Duration, 4 * time.Hour},
		{"nodeLeaseDurationSeconds", k.NodeLeaseDurationSeconds, int32(40)},
		{"imageGCHighThresholdPercent", *k.ImageGCHighThresholdPercent, int32(85)},
		{"cpuManagerPolicy", k.CPUManagerPolicy, "none"},
		{"memoryManagerPolicy", k.MemoryManagerPolicy, "None"},
		{"topologyManagerScope", k.TopologyManagerScope, "container"},
		{"hairpinMode", k.HairpinMode, "promiscuous-bridge"},
		{"podPidsLimit", *k.PodPidsLimit, int64(-1)},
		{"cpuCFSQuotaPeriod", k.CPUCFSQuotaPeriod.Duration, 100 * time.Millisecond},
		{"maxOpenFiles", k.MaxOpenFiles, int64(1000000)},
		{"contentType", k.ContentType, "application/vnd.kubernetes.protobuf"},
		{"serializeImagePulls", *k.SerializeImagePulls, true},
		{"iptablesMasqueradeBit", *k.IPTablesMasqueradeBit, int32(14)},
		{"containerLogMaxSize", k.ContainerLogMaxSize, "10Mi"},
		{"containerLogMonitorInterval", k.ContainerLogMonitorInterval.Duration, 10 * time.Second},
		{"configMapAndSecretChangeDetectionStrategy", k.ConfigMapAndSecretChangeDetectionStrategy, kubeletconfigv1beta1.WatchChangeDetectionStrategy},
		{"enforceNodeAllocatable", k.EnforceNodeAllocatable, []string{"pods"}},
		{"volumePluginDir", k.VolumePluginDir, DefaultVolumePluginDir},
		{"resolvConf", *k.ResolverConfig, "/etc/resolv.conf"},
		{"podLogsDir", k.PodLogsDir, "/var/log/pods"},
		{"registerNode", *k.RegisterNode, true},
		{"seccompDefault", *k.SeccompDefault, false},
		{"imageServiceEndpoint", k.ImageServiceEndpoint, ""},
		{"staticPodURL", k.StaticPodURL, ""},
		{"logging.format", k.Logging.Format, "text"},
	}
	for _, ch := range checks {
		if !reflect.DeepEqual(ch.got, ch.want) {
			t.Errorf("%s = %v, want %v", ch.name, ch.got, ch.want)
		}
	}
	k.EvictionHard["memory.available"] = "1Gi"
	if DefaultEvictionHard()["memory.available"] != "100Mi" {
		t.Error("SetDefaults shares the default evictionHard map")
	}
}

func ptrTo[T any](v T) *T { return &v }

const fileWithValues = header + `maxPods: 50
port: 11250
cgroupDriver: systemd
registerNode: false
failSwapOn: false
healthzPort: 0
authentication:
  anonymous:
    enabled: true
containerRuntimeEndpoint: unix:///run/crio/crio.sock
nodeStatusUpdateFrequency: 30s
clusterDNS: [10.0.0.10]
evictionHard:
  memory.available: 500Mi
systemReserved:
  cpu: 500m
`

func TestFlagsOverrideFile(t *testing.T) {
	c := mustLoadFile(t, fileWithValues,
		"--max-pods=20",
		"--container-runtime-endpoint", "unix:///run/containerd/containerd.sock",
		"--image-service-endpoint=unix:///run/img.sock",
		"--register-node",
		"--fail-swap-on=true",
		"--healthz-port=10300",
		"--anonymous-auth=false",
		"--cluster-dns=10.0.0.53,fd00::a",
		"--eviction-hard=nodefs.available<5%",
		"--system-reserved=memory=1Gi",
		"--node-status-update-frequency=5s",
		"--authorization-mode=AlwaysAllow",
		"--cgroup-driver=cgroupfs",
	)
	k := c.Kubelet
	checks := []struct {
		name      string
		got, want any
	}{
		{"maxPods", k.MaxPods, int32(20)},
		{"containerRuntimeEndpoint", k.ContainerRuntimeEndpoint, "unix:///run/containerd/containerd.sock"},
		{"imageServiceEndpoint", c.ImageEndpoint(), "unix:///run/img.sock"},
		{"registerNode", *k.RegisterNode, true},
		{"failSwapOn", *k.FailSwapOn, true},
		{"healthzPort", *k.HealthzPort, int32(10300)},
		{"anonymous", *k.Authentication.Anonymous.Enabled, false},
		{"clusterDNS", k.ClusterDNS, []string{"10.0.0.53", "fd00::a"}},
		{"evictionHard", k.EvictionHard, map[string]string{"nodefs.available": "5%"}},
		{"systemReserved", k.SystemReserved, map[string]string{"memory": "1Gi"}},
		{"nodeStatusUpdateFrequency", k.NodeStatusUpdateFrequency.Duration, 5 * time.Second},
		{"nodeStatusReportFrequency (from file's update frequency)", k.NodeStatusReportFrequency.Duration, 30 * time.Second},
		{"authorization.mode", k.Authorization.Mode, kubeletconfigv1beta1.KubeletAuthorizationModeAlwaysAllow},
		{"cgroupDriver", k.CgroupDriver, "cgroupfs"},
		{"port (not given, from file)", k.Port, int32(11250)},
	}
	for _, ch := range checks {
		if !reflect.DeepEqual(ch.got, ch.want) {
			t.Errorf("%s = %v, want %v", ch.name, ch.got, ch.want)
		}
	}
}

func TestOnlyGivenFlagsOverride(t *testing.T) {
	c := mustLoadFile(t, fileWithValues, "--v=2")
	k := c.Kubelet
	checks := []struct {
		name      string
		got, want any
	}{
		{"maxPods", k.MaxPods, int32(50)},
		{"port", k.Port, int32(11250)},
		{"cgroupDriver", k.CgroupDriver, "systemd"},
		{"registerNode", *k.RegisterNode, false},
		{"failSwapOn", *k.FailSwapOn, false},
		{"healthzPort", *k.HealthzPort, int32(0)},
		{"anonymous", *k.Authentication.Anonymous.Enabled, true},
		{"containerRuntimeEndpoint", k.ContainerRuntimeEndpoint, "unix:///run/crio/crio.sock"},
		{"imageEndpoint falls back", c.ImageEndpoint(), "unix:///run/crio/crio.sock"},
		{"clusterDNS", k.ClusterDNS, []string{"10.0.0.10"}},
		{"evictionHard", k.EvictionHard, map[string]string{"memory.available": "500Mi"}},
		{"systemReserved", k.SystemReserved, map[string]string{"cpu": "500m"}},
		{"nodeStatusReportFrequency", k.NodeStatusReportFrequency.Duration, 30 * time.Second},
		{"verbosity", c.Verbosity, 2},
	}
	for _, ch := range checks {
		if !reflect.DeepEqual(ch.got, ch.want) {
			t.Errorf("%s = %v, want %v", ch.name, ch.got, ch.want)
		}
	}
}

func TestFlagParsing(t *testing.T) {
	cases := []struct {
		name  string
		args  []string
		check func(c *Config) (got, want any)
	}{
		{"-v shorthand", []string{"-v", "3"}, func(c *Config) (any, any) { return c.Verbosity, 3 }},
		{"--v", []string{"--v=4"}, func(c *Config) (any, any) { return c.Verbosity, 4 }},
		{"underscore normalized", []string{"--max_pods=7"}, func(c *Config) (any, any) { return c.Kubelet.MaxPods, int32(7) }},
		{"root dir", []string{"--root-dir=/data/kubelet"}, func(c *Config) (any, any) { return c.RootDir, "/data/kubelet" }},
		{"pod manifest path", []string{"--pod-manifest-path=/etc/kubernetes/manifests"}, func(c *Config) (any, any) { return c.Kubelet.StaticPodPath, "/etc/kubernetes/manifests" }},
		{"manifest url", []string{"--manifest-url=http://example.com/pods"}, func(c *Config) (any, any) { return c.Kubelet.StaticPodURL, "http://example.com/pods" }},
		{"manifest url headers", []string{"--manifest-url-header=a:hello,b:again", "--manifest-url-header", "b:beautiful"},
			func(c *Config) (any, any) {
				return c.Kubelet.StaticPodURLHeader, map[string][]string{"a": {"hello"}, "b": {"again", "beautiful"}}
			}},
		{"anonymous-auth bare", []string{"--anonymous-auth"}, func(c *Config) (any, any) { return *c.Kubelet.Authentication.Anonymous.Enabled, true }},
		{"token webhook off", []string{"--authentication-token-webhook=false"}, func(c *Config) (any, any) { return *c.Kubelet.Authentication.Webhook.Enabled, false }},
		{"tls files", []string{"--tls-cert-file=a.crt", "--tls-private-key-file=a.key", "--client-ca-file=ca.crt"},
			func(c *Config) (any, any) {
				k := c.Kubelet
				return []string{k.TLSCertFile, k.TLSPrivateKeyFile, k.Authentication.X509.ClientCAFile}, []string{"a.crt", "a.key", "ca.crt"}
			}},
		{"server flags", []string{"--address=::", "--port=12250", "--healthz-bind-address=0.0.0.0", "--cluster-domain=example.local"},
			func(c *Config) (any, any) {
				k := c.Kubelet
				return []any{k.Address, k.Port, k.HealthzBindAddress, k.ClusterDomain}, []any{"::", int32(12250), "0.0.0.0", "example.local"}
			}},
		{"runtime request timeout", []string{"--runtime-request-timeout=15m"}, func(c *Config) (any, any) { return c.Kubelet.RuntimeRequestTimeout.Duration, 15 * time.Minute }},
		{"metrics bind address", []string{"--metrics-bind-address=0"}, func(c *Config) (any, any) { return c.MetricsBindAddress, "0" }},
		{"kube reserved", []string{"--kube-reserved=cpu=100m,memory=256Mi"}, func(c *Config) (any, any) {
			return c.Kubelet.KubeReserved, map[string]string{"cpu": "100m", "memory": "256Mi"}
		}},
		{"container gc defaults", nil, func(c *Config) (any, any) {
			return []any{c.MinimumGCAge, c.MaxPerPodContainerCount, c.MaxContainerCount}, []any{time.Duration(0), int32(1), int32(-1)}
		}},
		{"container gc flags", []string{"--minimum-container-ttl-duration=2h45m", "--maximum-dead-containers-per-container=0",
			"--maximum_dead_containers=250"}, func(c *Config) (any, any) {
			return []any{c.MinimumGCAge, c.MaxPerPodContainerCount, c.MaxContainerCount}, []any{165 * time.Minute, int32(0), int32(250)}
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

func TestFlagErrors(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"unknown flag", []string{"--bogus-flag=1"}, []string{"bogus-flag"}},
		{"unknown shorthand", []string{"-q"}, []string{"q"}},
		{"positional argument", []string{"extra"}, []string{"extra"}},
		{"bad max pods", []string{"--max-pods=many"}, []string{"--max-pods"}},
		{"bad address", []string{"--address=host"}, []string{"--address"}},
		{"bad eviction syntax", []string{"--eviction-hard=memory.available=1Gi"}, []string{"--eviction-hard"}},
		{"bad eviction value", []string{"--eviction-hard=memory.available<lots"}, []string{"evictionHard[memory.available]"}},
		{"bad system reserved", []string{"--system-reserved=cpu"}, []string{"--system-reserved"}},
		{"bad manifest header", []string{"--manifest-url-header=novalue"}, []string{"--manifest-url-header"}},
		{"bad bool", []string{"--register-node=maybe"}, []string{"--register-node"}},
		{"bad cgroup driver", []string{"--cgroup-driver=foo"}, []string{"cgroupDriver"}},
		{"bad port", []string{"--port=70000"}, []string{"port"}},
		{"bad authorization mode", []string{"--authorization-mode=RBAC"}, []string{"authorization.mode"}},
		{"bad runtime endpoint", []string{"--container-runtime-endpoint=tcp://1.2.3.4:5"}, []string{"containerRuntimeEndpoint"}},
		{"bad cluster dns", []string{"--cluster-dns=dns"}, []string{"clusterDNS[0]"}},
		{"bad metrics address", []string{"--metrics-bind-address=nope"}, []string{"--metrics-bind-address"}},
		{"empty hostname override", []string{"--hostname-override= "}, []string{"hostname"}},
		{"removed network plugin", []string{"--network-plugin=cni"}, []string{"--network-plugin", "removed from the kubelet"}},
		{"removed container runtime", []string{"--container-runtime", "remote"}, []string{"--container-runtime", "v1.27"}},
		{"removed klog flag alone", []string{"--logtostderr"}, []string{"--logtostderr", "v1.26"}},
		{"in-tree cloud provider", []string{"--cloud-provider=aws"}, []string{"--cloud-provider", "aws"}},
		{"lock contention without lock file", []string{"--exit-on-lock-contention"}, []string{"--lock-file"}},
		{"bad feature gate value", []string{"--feature-gates=Foo=maybe"}, []string{"--feature-gates", "Foo"}},
		{"feature gate without value", []string{"--feature-gates=Foo"}, []string{"--feature-gates"}},
		{"bad reserved memory", []string{"--reserved-memory=memory=1Gi"}, []string{"--reserved-memory"}},
		{"bad logging format", []string{"--logging-format=xml"}, []string{"logging.format", "xml"}},
		{"negative verbosity", []string{"--v=-1"}, []string{"-v"}},
		{"negative container ttl", []string{"--minimum-container-ttl-duration=-1s"},
			[]string{"--minimum-container-ttl-duration", "invalid minimum garbage collection age"}},
		{"bad dead containers count", []string{"--maximum-dead-containers=many"}, []string{"--maximum-dead-containers"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadT(tc.args...)
			wantErrContains(t, err, tc.want...)
		})
	}
}

func TestNodeLabels(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		want    map[string]string
		wantErr []string
	}{
		{"simple", []string{"--node-labels=a=b,c=d"}, map[string]string{"a": "b", "c": "d"}, nil},
		{"repeated flag merges", []string{"--node-labels=a=b", "--node-labels=c=d"}, map[string]string{"a": "b", "c": "d"}, nil},
		{"key without value", []string{"--node-labels=example.com/gpu"}, map[string]string{"example.com/gpu": ""}, nil},
		{"allowed kubelet label", []string{"--node-labels=kubernetes.io/hostname=x,topology.kubernetes.io/zone=z1"},
			map[string]string{"kubernetes.io/hostname": "x", "topology.kubernetes.io/zone": "z1"}, nil},
		{"allowed namespaces", []string{"--node-labels=node.kubernetes.io/pool=a,kubelet.kubernetes.io/x=y,foo.node.kubernetes.io/z=1"},
			map[string]string{"node.kubernetes.io/pool": "a", "kubelet.kubernetes.io/x": "y", "foo.node.kubernetes.io/z": "1"}, nil},
		{"beta os label", []string{"--node-labels=beta.kubernetes.io/os=linux"}, map[string]string{"beta.kubernetes.io/os": "linux"}, nil},
		{"node-role forbidden", []string{"--node-labels=node-role.kubernetes.io/worker="}, nil, []string{"--node-labels[node-role.kubernetes.io/worker]"}},
		{"k8s.io forbidden", []string{"--node-labels=example.k8s.io/a=b"}, nil, []string{"--node-labels[example.k8s.io/a]"}},
		{"invalid key", []string{"--node-labels=bad key=v"}, nil, []string{"--node-labels[bad key]"}},
		{"invalid value", []string{"--node-labels=k=bad value"}, nil, []string{"--node-labels[k]", "bad value"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := loadT(tc.args...)
			if tc.wantErr != nil {
				wantErrContains(t, err, tc.wantErr...)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(c.NodeLabels, tc.want) {
				t.Errorf("NodeLabels = %v, want %v", c.NodeLabels, tc.want)
			}
		})
	}
}

func TestRegisterWithTaints(t *testing.T) {
	cases := []struct {
		name    string
		arg     string
		want    []corev1.Taint
		wantErr string
	}{
		{"key value effect and key effect", "a=b:NoSchedule,example.com/c:NoExecute", []corev1.Taint{
			{Key: "a", Value: "b", Effect: corev1.TaintEffectNoSchedule},
			{Key: "example.com/c", Effect: corev1.TaintEffectNoExecute},
		}, ""},
		{"prefer no schedule", "x=y:PreferNoSchedule", []corev1.Taint{{Key: "x", Value: "y", Effect: corev1.TaintEffectPreferNoSchedule}}, ""},
		{"bad effect", "a=b:Sometimes", nil, "Sometimes"},
		{"missing effect", "a=b", nil, "a=b"},
		{"two equals", "a=b=c:NoSchedule", nil, "a=b=c"},
		{"bad key", "a b:NoSchedule", nil, "a b"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := loadT("--register-with-taints=" + tc.arg)
			if tc.wantErr != "" {
				wantErrContains(t, err, "--register-with-taints", tc.wantErr)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(c.Kubelet.RegisterWithTaints, tc.want) {
				t.Errorf("taints = %v, want %v", c.Kubelet.RegisterWithTaints, tc.want)
			}
		})
	}
}

func TestNodeIP(t *testing.T) {
	cases := []struct {
		name    string
		arg     string
		want    []string
		wantErr string
	}{
		{"ipv4", "10.0.0.5", []string{"10.0.0.5"}, ""},
		{"ipv6", "fd00::5", []string{"fd00::5"}, ""},
		{"dual stack", "10.0.0.5,fd00::5", []string{"10.0.0.5", "fd00::5"}, ""},
		{"dual stack v6 first", "fd00::5, 10.0.0.5", []string{"fd00::5", "10.0.0.5"}, ""},
		{"unspecified alone", "::", []string{"::"}, ""},
		{"two ipv4", "10.0.0.5,10.0.0.6", nil, "at most one IPv4 and one IPv6"},
		{"two ipv6", "fd00::5,fd00::6", nil, "at most one IPv4 and one IPv6"},
		{"three", "10.0.0.5,fd00::5,10.0.0.6", nil, "single IP or a dual-stack pair"},
		{"unspecified in pair", "0.0.0.0,fd00::5", nil, "cannot include"},
		{"not an ip", "node1", nil, "node1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := loadT("--node-ip=" + tc.arg)
			if tc.wantErr != "" {
				wantErrContains(t, err, "--node-ip", tc.wantErr)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, ip := range c.NodeIPs {
				got = append(got, ip.String())
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("NodeIPs = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRelativePathsResolved(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, dir, "etc/config.yaml", header+`staticPodPath: manifests
tlsCertFile: pki/kubelet.crt
tlsPrivateKeyFile: ./pki/kubelet.key
authentication:
  x509:
    clientCAFile: ../ca.crt
resolvConf: resolv.conf
volumePluginDir: /abs/plugins
`)
	kc, _, err := LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	etc := filepath.Join(dir, "etc")
	checks := []struct {
		name, got, want string
	}{
		{"staticPodPath", kc.StaticPodPath, filepath.Join(etc, "manifests")},
		{"tlsCertFile", kc.TLSCertFile, filepath.Join(etc, "pki/kubelet.crt")},
		{"tlsPrivateKeyFile", kc.TLSPrivateKeyFile, filepath.Join(etc, "pki/kubelet.key")},
		{"clientCAFile", kc.Authentication.X509.ClientCAFile, filepath.Join(dir, "ca.crt")},
		{"resolvConf", *kc.ResolverConfig, filepath.Join(etc, "resolv.conf")},
		{"volumePluginDir (absolute kept)", kc.VolumePluginDir, "/abs/plugins"},
		{"podLogsDir (default)", kc.PodLogsDir, DefaultPodLogsDir},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s = %q, want %q", ch.name, ch.got, ch.want)
		}
	}
	// A path given by flag is not resolved against the file's directory.
	c, err := loadT("--config", path, "--pod-manifest-path=static")
	if err != nil {
		t.Fatal(err)
	}
	if c.Kubelet.StaticPodPath != "static" {
		t.Errorf("flag staticPodPath = %q, want %q", c.Kubelet.StaticPodPath, "static")
	}
}

func TestHostname(t *testing.T) {
	failing := func() (string, error) { return "", errors.New("boom") }
	cases := []struct {
		name     string
		override string
		os       func() (string, error)
		want     string
		wantErr  string
	}{
		{"override lower-cased and trimmed", "  MyHost.EXAMPLE.com \n", failing, "myhost.example.com", ""},
		{"os hostname lower-cased", "", func() (string, error) { return " NODE-1 ", nil }, "node-1", ""},
		{"os hostname error", "", failing, "", "boom"},
		{"empty os hostname", "", func() (string, error) { return "  ", nil }, "", "empty hostname"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{}
			if tc.override != "" {
				args = append(args, "--hostname-override="+tc.override)
			}
			c, err := load(args, io.Discard, tc.os)
			if tc.wantErr != "" {
				wantErrContains(t, err, tc.wantErr)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Hostname != tc.want || c.NodeName != tc.want {
				t.Errorf("Hostname/NodeName = %q/%q, want %q", c.Hostname, c.NodeName, tc.want)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	for _, arg := range []string{"--help", "-h"} {
		t.Run(arg, func(t *testing.T) {
			var out bytes.Buffer
			_, err := load([]string{arg}, &out, fakeHostname)
			if !errors.Is(err, pflag.ErrHelp) {
				t.Fatalf("err = %v, want pflag.ErrHelp", err)
			}
			for _, want := range []string{"--config", "--config-dir", "--node-ip", "--container-runtime-endpoint", "--provider-id", "--feature-gates", "--bootstrap-kubeconfig", "10250"} {
				if !strings.Contains(out.String(), want) {
					t.Errorf("usage does not mention %q", want)
				}
			}
			if strings.Contains(out.String(), "--pod-infra-container-image") {
				t.Error("usage lists a flag the kubelet removed")
			}
			if strings.Contains(out.String(), "--maximum-dead-containers") {
				t.Error("usage lists a flag the kubelet marks deprecated (and hides)")
			}
		})
	}
}

func TestParseThresholds(t *testing.T) {
	q := resource.MustParse
	cases := []struct {
		name    string
		in      map[string]string
		want    []Threshold
		wantErr string
	}{
		{"defaults", DefaultEvictionHard(), []Threshold{
			{Signal: "imagefs.available", Percentage: 0.15},
			{Signal: "imagefs.inodesFree", Percentage: 0.05},
			{Signal: "memory.available", Quantity: ptrTo(q("100Mi"))},
			{Signal: "nodefs.available", Percentage: 0.10},
			{Signal: "nodefs.inodesFree", Percentage: 0.05},
		}, ""},
		{"pid and containerfs", map[string]string{"pid.available": "1k", "containerfs.inodesFree": "7.5%"}, []Threshold{
			{Signal: "containerfs.inodesFree", Percentage: 0.075},
			{Signal: "pid.available", Quantity: ptrTo(q("1k"))},
		}, ""},
		{"0% and 100% ignored", map[string]string{"memory.available": "0%", "nodefs.available": "100%"}, nil, ""},
		{"empty", nil, nil, ""},
		{"unknown signal", map[string]string{"cpu.available": "1"}, nil, "cpu.available"},
		{"not a quantity", map[string]string{"memory.available": "lots"}, nil, "lots"},
		{"zero quantity", map[string]string{"memory.available": "0"}, nil, "positive"},
		{"negative percent", map[string]string{"memory.available": "-5%"}, nil, "-5%"},
		{"too large percent", map[string]string{"memory.available": "101%"}, nil, "101%"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseThresholds(tc.in)
			if tc.wantErr != "" {
				wantErrContains(t, err, tc.wantErr)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %d thresholds %+v, want %d", len(got), got, len(tc.want))
			}
			for i := range got {
				g, w := got[i], tc.want[i]
				if g.Signal != w.Signal || (w.Quantity == nil) != (g.Quantity == nil) ||
					(w.Quantity != nil && g.Quantity.Cmp(*w.Quantity) != 0) || !approx(g.Percentage, w.Percentage) {
					t.Errorf("threshold %d = %+v, want %+v", i, g, w)
				}
			}
		})
	}
}

func approx(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

func TestReserved(t *testing.T) {
	c := newConfig()
	c.Kubelet.SystemReserved = map[string]string{"cpu": "500m", "memory": "1Gi", "pid": "1000"}
	c.Kubelet.KubeReserved = map[string]string{"cpu": "0.25", "memory": "512Mi", "ephemeral-storage": "1Gi"}
	got, err := c.Reserved()
	if err != nil {
		t.Fatal(err)
	}
	want := map[corev1.ResourceName]string{"cpu": "750m", "memory": "1536Mi", "pid": "1k", "ephemeral-storage": "1Gi"}
	if len(got) != len(want) {
		t.Fatalf("Reserved() = %v, want %v", got, want)
	}
	for name, w := range want {
		if q := got[name]; q.Cmp(resource.MustParse(w)) != 0 {
			t.Errorf("%s = %s, want %s", name, q.String(), w)
		}
	}
	c.Kubelet.KubeReserved = map[string]string{"gpu": "1"}
	_, err = c.Reserved()
	wantErrContains(t, err, "kubeReserved", "gpu")
}

func TestEndpoints(t *testing.T) {
	cases := []struct {
		name, runtime, image, wantRuntime, wantImage string
	}{
		{"defaults", DefaultContainerRuntimeEndpoint, "", DefaultContainerRuntimeEndpoint, DefaultContainerRuntimeEndpoint},
		{"separate image service", "unix:///run/a.sock", "unix:///run/b.sock", "unix:///run/a.sock", "unix:///run/b.sock"},
		{"bare paths", "/run/a.sock", "/run/b.sock", "unix:///run/a.sock", "unix:///run/b.sock"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newConfig()
			c.Kubelet.ContainerRuntimeEndpoint, c.Kubelet.ImageServiceEndpoint = tc.runtime, tc.image
			if err := Validate(c); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			if got := c.RuntimeEndpoint(); got != tc.wantRuntime {
				t.Errorf("RuntimeEndpoint() = %q, want %q", got, tc.wantRuntime)
			}
			if got := c.ImageEndpoint(); got != tc.wantImage {
				t.Errorf("ImageEndpoint() = %q, want %q", got, tc.wantImage)
			}
		})
	}
}

// Image pulls run one at a time by default, as the kubelet's serial image puller.
func TestImagePullParallelism(t *testing.T) {
	for _, tc := range []struct {
		name string
		kc   kubeletconfigv1beta1.KubeletConfiguration
		want int
	}{
		{"default: serial", kubeletconfigv1beta1.KubeletConfiguration{}, 1},
		{"maxParallelImagePulls", kubeletconfigv1beta1.KubeletConfiguration{MaxParallelImagePulls: ptrTo[int32](3)}, 3},
		{"serializeImagePulls wins", kubeletconfigv1beta1.KubeletConfiguration{SerializeImagePulls: ptrTo(true), MaxParallelImagePulls: ptrTo[int32](1)}, 1},
		{"parallel without a bound", kubeletconfigv1beta1.KubeletConfiguration{SerializeImagePulls: ptrTo(false)}, unboundedImagePulls},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Config{Kubelet: tc.kc}
			SetDefaults(&c.Kubelet)
			if got := c.ImagePullParallelism(); got != tc.want {
				t.Errorf("ImagePullParallelism = %d, want %d", got, tc.want)
			}
		})
	}
}

// Graceful node shutdown's periods are checked as the kubelet checks them.
func TestValidateShutdownPeriods(t *testing.T) {
	for _, tc := range []struct {
		name string
		kc   kubeletconfigv1beta1.KubeletConfiguration
		want string
	}{
		{"critical above the whole", kubeletconfigv1beta1.KubeletConfiguration{ShutdownGracePeriod: metav1.Duration{Duration: 10 * time.Second},
			ShutdownGracePeriodCriticalPods: metav1.Duration{Duration: 20 * time.Second}}, "must be <= shutdownGracePeriod 10s"},
		{"below a second", kubeletconfigv1beta1.KubeletConfiguration{ShutdownGracePeriod: metav1.Duration{Duration: 500 * time.Millisecond}},
			"must be either zero or otherwise >= 1 sec"},
		{"both ways", kubeletconfigv1beta1.KubeletConfiguration{ShutdownGracePeriod: metav1.Duration{Duration: 10 * time.Second},
			ShutdownGracePeriodByPodPriority: []kubeletconfigv1beta1.ShutdownGracePeriodByPodPriority{{Priority: 0, ShutdownGracePeriodSeconds: 5}}},
			"Cannot specify both shutdownGracePeriodByPodPriority and shutdownGracePeriod at the same time"},
	} {
		errs := validateShutdown(&tc.kc)
		if len(errs) != 1 || !strings.Contains(errs[0].Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, errs, tc.want)
		}
	}
	if errs := validateShutdown(&kubeletconfigv1beta1.KubeletConfiguration{ShutdownGracePeriod: metav1.Duration{Duration: 30 * time.Second},
		ShutdownGracePeriodCriticalPods: metav1.Duration{Duration: 10 * time.Second}}); len(errs) != 0 {
		t.Errorf("valid periods: %v", errs)
	}
}
