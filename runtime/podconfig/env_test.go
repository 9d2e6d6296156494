package podconfig

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
)

// fakeEnvSource serves ConfigMaps and Secrets by namespace/name and counts the fetches.
type fakeEnvSource struct {
	configMaps map[string]*corev1.ConfigMap
	secrets    map[string]*corev1.Secret
	fetches    int
	err        error // returned for every fetch when set
}

func (f *fakeEnvSource) GetConfigMap(_ context.Context, ns, name string) (*corev1.ConfigMap, error) {
	f.fetches++
	if f.err != nil {
		return nil, f.err
	}
	if cm, ok := f.configMaps[ns+"/"+name]; ok {
		return cm, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, name)
}

func (f *fakeEnvSource) GetSecret(_ context.Context, ns, name string) (*corev1.Secret, error) {
	f.fetches++
	if f.err != nil {
		return nil, f.err
	}
	if s, ok := f.secrets[ns+"/"+name]; ok {
		return s, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
}

func envSource() *fakeEnvSource {
	return &fakeEnvSource{
		configMaps: map[string]*corev1.ConfigMap{
			"default/cfg": {ObjectMeta: metav1.ObjectMeta{Name: "cfg"}, Data: map[string]string{
				"LOG_LEVEL": "debug", "mode": "fast", "bad=key": "x", "b": "2", "a": "1"}},
		},
		secrets: map[string]*corev1.Secret{
			"default/creds": {ObjectMeta: metav1.ObjectMeta{Name: "creds"}, Data: map[string][]byte{
				"PASSWORD": []byte("s3cret"), "USER": []byte("admin")}},
		},
	}
}

func envOpts() EnvOptions {
	return EnvOptions{
		NodeName:        "node1",
		HostIPs:         []string{"192.168.0.10", "fd00::10"},
		PodIPs:          []string{"fd00:10:244::5", "10.244.0.5"},
		NodeAllocatable: rl("cpu", "4", "memory", "8Gi", "ephemeral-storage", "100Gi"),
	}
}

// envString renders an environment as "K=V" lines, in order.
func envString(t *testing.T, pod *corev1.Pod, c *corev1.Container, opts EnvOptions, src EnvSource) (string, []string, error) {
	t.Helper()
	env, skipped, err := MakeEnvironment(context.Background(), pod, c, opts, src)
	var lines []string
	for _, kv := range env {
		lines = append(lines, kv.Key+"="+string(kv.Value))
	}
	return strings.Join(lines, "\n"), skipped, err
}

func fieldEnv(name, path string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: path}}}
}

func resourceEnv(name, container, res, divisor string) corev1.EnvVar {
	sel := &corev1.ResourceFieldSelector{ContainerName: container, Resource: res}
	if divisor != "" {
		sel.Divisor = resource.MustParse(divisor)
	}
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: sel}}
}

func TestMakeEnvironmentValues(t *testing.T) {
	tests := []struct {
		name string
		env  []corev1.EnvVar
		svc  map[string]string
		want string
	}{
		{"plain values in order", []corev1.EnvVar{{Name: "B", Value: "2"}, {Name: "A", Value: "1"}, {Name: "EMPTY"}}, nil, "B=2\nA=1\nEMPTY="},
		{"expansion of earlier variables", []corev1.EnvVar{{Name: "HOST", Value: "db"}, {Name: "URL", Value: "http://$(HOST):$(PORT)/"}, {Name: "PORT", Value: "5432"}},
			nil, "HOST=db\nURL=http://db:$(PORT)/\nPORT=5432"},
		{"$$ escapes, undefined left as is", []corev1.EnvVar{{Name: "X", Value: "1"}, {Name: "Y", Value: "$$(X) $(X) $(NOPE) $X $ $("}},
			nil, "X=1\nY=$(X) 1 $(NOPE) $X $ $("},
		{"a later definition replaces an earlier one in place", []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "2"}, {Name: "A", Value: "$(A)$(B)"}},
			nil, "A=12\nB=2"},
		{"service variables expand and come last unless overridden",
			[]corev1.EnvVar{{Name: "ADDR", Value: "$(DB_SERVICE_HOST):$(DB_SERVICE_PORT)"}, {Name: "DB_SERVICE_PORT", Value: "6000"}},
			map[string]string{"DB_SERVICE_HOST": "10.0.0.7", "DB_SERVICE_PORT": "5432", "KUBERNETES_SERVICE_HOST": "10.0.0.1"},
			"ADDR=10.0.0.7:5432\nDB_SERVICE_PORT=6000\nDB_SERVICE_HOST=10.0.0.7\nKUBERNETES_SERVICE_HOST=10.0.0.1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := testPod()
			c := &pod.Spec.Containers[0]
			c.Env = tt.env
			opts := envOpts()
			opts.ServiceEnv = tt.svc
			got, _, err := envString(t, pod, c, opts, envSource())
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

func TestMakeEnvironmentFieldRef(t *testing.T) {
	tests := []struct {
		path    string
		want    string
		wantErr string
	}{
		{"metadata.name", "web", ""},
		{"metadata.namespace", "default", ""},
		{"metadata.uid", "1234-abcd", ""},
		{"metadata.labels['app']", "web", ""},
		{"metadata.labels['missing']", "", ""},
		{"metadata.annotations['note']", "x", ""},
		{"metadata.labels", `app="web"`, ""},
		{"spec.nodeName", "node1", ""},
		{"spec.serviceAccountName", "default", ""},
		{"status.hostIP", "192.168.0.10", ""},
		{"status.hostIPs", "192.168.0.10,fd00::10", ""},
		{"status.podIP", "10.244.0.5", ""}, // the node's family first
		{"status.podIPs", "10.244.0.5,fd00:10:244::5", ""},
		{"metadata.labels['bad key!']", "", "invalid key subscript in metadata.labels['bad key!']"},
		{"spec.restartPolicy", "", "unsupported fieldPath: spec.restartPolicy"},
		{"spec.containers['x']", "", "field label does not support subscript"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			pod := testPod()
			c := &pod.Spec.Containers[0]
			c.Env = []corev1.EnvVar{fieldEnv("V", tt.path)}
			got, _, err := envString(t, pod, c, envOpts(), envSource())
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrCreateContainerConfig) {
					t.Fatalf("err = %v, want a CreateContainerConfigError containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != "V="+tt.want {
				t.Errorf("got %q, want V=%s", got, tt.want)
			}
		})
	}
}

func TestMakeEnvironmentIPsUnknown(t *testing.T) {
	pod := testPod()
	c := &pod.Spec.Containers[0]
	c.Env = []corev1.EnvVar{fieldEnv("IP", "status.podIP"), fieldEnv("IPS", "status.podIPs")}
	got, _, err := envString(t, pod, c, EnvOptions{}, envSource())
	if err != nil || got != "IP=\nIPS=" {
		t.Errorf("got %q, %v; want empty pod IPs", got, err)
	}
	c.Env = []corev1.EnvVar{fieldEnv("HOST", "status.hostIP")}
	if _, _, err := envString(t, pod, c, EnvOptions{}, envSource()); !errors.Is(err, ErrCreateContainerConfig) {
		t.Errorf("unknown host IP: err = %v", err)
	}
}

func TestMakeEnvironmentResourceFieldRef(t *testing.T) {
	tests := []struct {
		name    string
		env     corev1.EnvVar
		want    string
		wantErr string
	}{
		{"cpu limit in cores, rounded up", resourceEnv("V", "", "limits.cpu", ""), "1", ""},
		{"cpu limit in millicores", resourceEnv("V", "", "limits.cpu", "1m"), "200", ""},
		{"cpu request", resourceEnv("V", "", "requests.cpu", "1m"), "100", ""},
		{"memory limit in Mi", resourceEnv("V", "", "limits.memory", "1Mi"), "128", ""},
		{"memory request in bytes", resourceEnv("V", "", "requests.memory", ""), "67108864", ""},
		{"unset ephemeral-storage limit is the node's allocatable", resourceEnv("V", "", "limits.ephemeral-storage", "1Gi"), "100", ""},
		{"unset request is 0", resourceEnv("V", "", "requests.ephemeral-storage", ""), "0", ""},
		{"another container's unset limit", resourceEnv("V", "sidecar", "limits.memory", "1Gi"), "8", ""},
		{"another container's request", resourceEnv("V", "sidecar", "requests.cpu", "1m"), "50", ""},
		{"an init container's limits are not defaulted", resourceEnv("V", "init", "limits.cpu", ""), "0", ""},
		{"unknown container", resourceEnv("V", "nope", "limits.cpu", ""), "", "container nope not found"},
		{"unsupported resource", resourceEnv("V", "", "limits.nvidia.com/gpu", ""), "", "unsupported container resource : limits.nvidia.com/gpu"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := testPod()
			pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "sidecar", Resources: resources(rl("cpu", "50m"), nil)})
			pod.Spec.InitContainers = []corev1.Container{{Name: "init"}}
			c := &pod.Spec.Containers[0]
			c.Env = []corev1.EnvVar{tt.env}
			got, _, err := envString(t, pod, c, envOpts(), envSource())
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrCreateContainerConfig) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != "V="+tt.want {
				t.Errorf("got %q, want V=%s", got, tt.want)
			}
		})
	}
}

func TestMakeEnvironmentPodLevelLimits(t *testing.T) {
	pod := testPod()
	pod.Spec.Resources = &corev1.ResourceRequirements{Limits: rl("memory", "2Gi")}
	c := &pod.Spec.Containers[0]
	c.Resources = corev1.ResourceRequirements{}
	c.Env = []corev1.EnvVar{resourceEnv("MEM", "", "limits.memory", "1Gi"), resourceEnv("CPU", "", "limits.cpu", "")}
	got, _, err := envString(t, pod, c, envOpts(), envSource())
	if err != nil || got != "MEM=2\nCPU=4" {
		t.Errorf("got %q, %v; want the pod-level memory limit and the node's cpu", got, err)
	}
}

func cmKey(name, key string, optional *bool) corev1.EnvVar {
	return corev1.EnvVar{Name: "V", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: key, Optional: optional}}}
}

func secretKey(name, key string, optional *bool) corev1.EnvVar {
	return corev1.EnvVar{Name: "V", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: key, Optional: optional}}}
}

func TestMakeEnvironmentKeyRefs(t *testing.T) {
	tests := []struct {
		name    string
		env     corev1.EnvVar
		want    string
		wantErr string
	}{
		{"configMap key", cmKey("cfg", "mode", nil), "V=fast", ""},
		{"secret key", secretKey("creds", "PASSWORD", nil), "V=s3cret", ""},
		{"missing configMap key", cmKey("cfg", "foo", nil), "", "couldn't find key foo in ConfigMap default/cfg"},
		{"missing secret key", secretKey("creds", "foo", ptr.To(false)), "", "couldn't find key foo in Secret default/creds"},
		{"missing configMap", cmKey("bar", "foo", nil), "", `configmaps "bar" not found`},
		{"missing secret", secretKey("nope", "foo", nil), "", `secrets "nope" not found`},
		{"optional missing configMap key", cmKey("cfg", "foo", ptr.To(true)), "", ""},
		{"optional missing configMap", cmKey("bar", "foo", ptr.To(true)), "", ""},
		{"optional missing secret", secretKey("nope", "foo", ptr.To(true)), "", ""},
		{"optional missing secret key", secretKey("creds", "foo", ptr.To(true)), "", ""},
		{"fileKeyRef needs a volume", corev1.EnvVar{Name: "V", ValueFrom: &corev1.EnvVarSource{FileKeyRef: &corev1.FileKeySelector{VolumeName: "env", Path: "a.env", Key: "K"}}},
			"", `cannot find the volume "env" referenced by FileKeyRef`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := testPod()
			c := &pod.Spec.Containers[0]
			c.Env = []corev1.EnvVar{tt.env}
			got, _, err := envString(t, pod, c, envOpts(), envSource())
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr && !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrCreateContainerConfig) {
					t.Fatalf("err = %v, want a CreateContainerConfigError %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestMakeEnvironmentErrorMessage(t *testing.T) {
	pod := testPod()
	c := &pod.Spec.Containers[0]
	c.Env = []corev1.EnvVar{cmKey("cfg", "foo", nil)}
	_, _, err := envString(t, pod, c, envOpts(), envSource())
	if err == nil || err.Error() != "couldn't find key foo in ConfigMap default/cfg" {
		t.Errorf("message %q is not the kubelet's", err)
	}
	c.Env = []corev1.EnvVar{cmKey("bar", "foo", nil)}
	_, _, err = envString(t, pod, c, envOpts(), envSource())
	if !apierrors.IsNotFound(err) || !errors.Is(err, ErrCreateContainerConfig) || err.Error() != `configmaps "bar" not found` {
		t.Errorf("err %v: want the API's NotFound, as is", err)
	}
	boom := errors.New("connection refused")
	c.EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}, Optional: ptr.To(true)}}}
	c.Env = nil
	if _, _, err = envString(t, pod, c, envOpts(), &fakeEnvSource{err: boom}); !errors.Is(err, boom) || !errors.Is(err, ErrCreateContainerConfig) {
		t.Errorf("an optional source that cannot be read is an error: %v", err)
	}
}

func TestMakeEnvironmentEnvFrom(t *testing.T) {
	cmRef := func(name, prefix string, optional *bool) corev1.EnvFromSource {
		return corev1.EnvFromSource{Prefix: prefix, ConfigMapRef: &corev1.ConfigMapEnvSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: name}, Optional: optional}}
	}
	secretRef := func(name, prefix string) corev1.EnvFromSource {
		return corev1.EnvFromSource{Prefix: prefix, SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}}
	}
	tests := []struct {
		name        string
		from        []corev1.EnvFromSource
		env         []corev1.EnvVar
		want        string
		wantSkipped []string
		wantErr     string
		wantFetches int
	}{
		{name: "configMap keys sorted, invalid names skipped", from: []corev1.EnvFromSource{cmRef("cfg", "", nil)},
			want: "LOG_LEVEL=debug\na=1\nb=2\nmode=fast", wantSkipped: []string{"bad=key"}, wantFetches: 1},
		{name: "prefix", from: []corev1.EnvFromSource{cmRef("cfg", "CFG_", nil), secretRef("creds", "DB_")},
			want:        "CFG_LOG_LEVEL=debug\nCFG_a=1\nCFG_b=2\nCFG_mode=fast\nDB_PASSWORD=s3cret\nDB_USER=admin",
			wantSkipped: []string{"CFG_bad=key"}, wantFetches: 2},
		{name: "env overrides envFrom and may expand it", from: []corev1.EnvFromSource{secretRef("creds", "")},
			env:  []corev1.EnvVar{{Name: "USER", Value: "root"}, {Name: "DSN", Value: "$(USER):$(PASSWORD)"}, cmKey("cfg", "mode", nil)},
			want: "PASSWORD=s3cret\nUSER=root\nDSN=root:s3cret\nV=fast", wantFetches: 2},
		{name: "each object fetched once", from: []corev1.EnvFromSource{cmRef("cfg", "A_", nil), cmRef("cfg", "B_", nil)},
			env:         []corev1.EnvVar{cmKey("cfg", "mode", nil)},
			want:        "A_LOG_LEVEL=debug\nA_a=1\nA_b=2\nA_mode=fast\nB_LOG_LEVEL=debug\nB_a=1\nB_b=2\nB_mode=fast\nV=fast",
			wantSkipped: []string{"A_bad=key", "B_bad=key"}, wantFetches: 1},
		{name: "optional missing configMap", from: []corev1.EnvFromSource{cmRef("missing", "", ptr.To(true))}, want: "", wantFetches: 1},
		{name: "missing configMap", from: []corev1.EnvFromSource{cmRef("missing", "", nil)}, wantErr: `configmaps "missing" not found`, wantFetches: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod, src := testPod(), envSource()
			c := &pod.Spec.Containers[0]
			c.EnvFrom, c.Env = tt.from, tt.env
			got, skipped, err := envString(t, pod, c, envOpts(), src)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want || strings.Join(skipped, ",") != strings.Join(tt.wantSkipped, ",") {
				t.Errorf("got\n%s\nskipped %v\nwant\n%s\nskipped %v", got, skipped, tt.want, tt.wantSkipped)
			}
			if src.fetches != tt.wantFetches {
				t.Errorf("%d fetches, want %d", src.fetches, tt.wantFetches)
			}
		})
	}
}

func TestExpand(t *testing.T) {
	vars := map[string]string{"A": "x", "EMPTY": "", "B": "$(A)"}
	tests := []struct{ in, want string }{
		{"", ""},
		{"plain", "plain"},
		{"$(A)", "x"},
		{"$(A)$(A)-$(EMPTY)-", "xx--"},
		{"$(B)", "$(A)"}, // no recursion
		{"$$(A)", "$(A)"},
		{"$$$(A)", "$x"},
		{"$$$$", "$$"},
		{"$(UNDEFINED)", "$(UNDEFINED)"},
		{"$()", "$()"},
		{"$(A", "$(A"},
		{"$A", "$A"},
		{"a$", "a$"},
		{"$", "$"},
		{"é$(A)é", "éxé"},
	}
	for _, tt := range tests {
		if got := Expand(tt.in, mappingFor(vars)); got != tt.want {
			t.Errorf("Expand(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// fileKeyRef reads a variable from an env file in one of the pod's volumes, as the kubelet does: KEY='value'
// lines, an optional key the file lacks leaves the variable out, a required one is an error, a path that
// climbs out of the volume stays inside it, and a file that does not parse is an error.
func TestMakeEnvironmentFileKeyRef(t *testing.T) {
	vol := t.TempDir()
	if err := os.WriteFile(filepath.Join(vol, "config.env"), []byte("# made by init\nDB='postgres://db'\nMULTI='a\nb' # two lines\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(vol, "bad.env"), []byte("DB=unquoted\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fileEnv := func(name, path, key string, optional bool) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FileKeyRef: &corev1.FileKeySelector{
			VolumeName: "config", Path: path, Key: key, Optional: ptr.To(optional)}}}
	}
	opts := envOpts()
	opts.VolumePath = func(name string) (string, error) {
		if name != "config" {
			return "", errors.New("no such volume")
		}
		return vol, nil
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}}
	c := &corev1.Container{Name: "c", Env: []corev1.EnvVar{
		fileEnv("DB_URL", "config.env", "DB", false),
		fileEnv("MULTI", "../../config.env", "MULTI", false),
		fileEnv("MISSING", "config.env", "NOPE", true),
	}}
	got, _, err := envString(t, pod, c, opts, envSource())
	if err != nil {
		t.Fatal(err)
	}
	if want := "DB_URL=postgres://db\nMULTI=a\nb"; got != want {
		t.Errorf("environment %q, want %q", got, want)
	}
	for _, tc := range []struct {
		env  corev1.EnvVar
		want string
	}{
		{fileEnv("X", "config.env", "NOPE", false), `environment variable key "NOPE" not found in file`},
		{fileEnv("X", "bad.env", "DB", true), "couldn't parse env file"},
		{fileEnv("X", "absent.env", "DB", true), "couldn't parse env file"},
		{corev1.EnvVar{Name: "X", ValueFrom: &corev1.EnvVarSource{FileKeyRef: &corev1.FileKeySelector{VolumeName: "other", Path: "a", Key: "b"}}},
			`cannot find the volume "other" referenced by FileKeyRef`},
	} {
		_, _, err := envString(t, pod, &corev1.Container{Name: "c", Env: []corev1.EnvVar{tc.env}}, opts, envSource())
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one with %q", tc.env.ValueFrom.FileKeyRef.Path, err, tc.want)
		}
	}
}
