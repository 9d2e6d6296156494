package volumes

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
)

func tokenProjection(path, audience string, exp *int64) corev1.VolumeProjection {
	return corev1.VolumeProjection{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: path, Audience: audience, ExpirationSeconds: exp}}
}

// kubeAPIAccess is the projected volume the API server injects into every pod.
func kubeAPIAccess() corev1.Volume {
	return vol("kube-api-access", corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		DefaultMode: ptrTo[int32](0o644),
		Sources: []corev1.VolumeProjection{
			tokenProjection("token", "", ptrTo[int64](3607)),
			{ConfigMap: &corev1.ConfigMapProjection{
				LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
				Items:                []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}},
			}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{fieldItem("namespace", "metadata.namespace")}}},
		},
	}})
}

func TestProjectedVolume(t *testing.T) {
	env := newTestEnv(t)
	env.objects.addConfigMap("ns", "kube-root-ca.crt", map[string]string{"ca.crt": "CA"})
	pod := newPod(kubeAPIAccess())
	mustSetUp(t, env.m, pod)
	dir := must(env.m.volumeDir(pod.UID, pluginProjected, "kube-api-access"))
	want := map[string]string{"token": "token-1", "ca.crt": "CA", "namespace": "ns"}
	if got := readVolume(t, dir); !reflect.DeepEqual(got, want) {
		t.Errorf("files = %v, want %v", got, want)
	}
	if calls := env.mounter.callsWith("tmpfs " + dir); len(calls) != 1 {
		t.Errorf("projected volume not on tmpfs: %v", calls)
	}
	req := env.objects.tokenCalls[0]
	wantSpec := authenticationv1.TokenRequestSpec{
		ExpirationSeconds: ptrTo[int64](3607),
		BoundObjectRef:    &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: "web", UID: "uid-1"},
	}
	if !reflect.DeepEqual(req.Spec, wantSpec) || env.objects.tokenSA[0] != "ns/app" {
		t.Errorf("token request for %s = %+v, want ns/app %+v", env.objects.tokenSA[0], req.Spec, wantSpec)
	}
}

func TestProjectedTokenRequest(t *testing.T) {
	tests := []struct {
		name      string
		proj      corev1.VolumeProjection
		fsGroup   *int64
		wantAud   []string
		wantExp   int64
		wantMode  uint32
		wantError string
	}{
		{name: "defaults", proj: tokenProjection("t", "", nil), wantExp: 3600, wantMode: 0o644},
		{name: "audience and expiry", proj: tokenProjection("t", "vault", ptrTo[int64](7200)), wantAud: []string{"vault"}, wantExp: 7200, wantMode: 0o644},
		{name: "fsGroup makes it 0640", proj: tokenProjection("t", "", nil), fsGroup: ptrTo[int64](2000), wantExp: 3600, wantMode: 0o640},
		{name: "below the minimum", proj: tokenProjection("t", "", ptrTo[int64](60)), wantError: "expirationSeconds 60 is below the minimum of 600"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := newTestEnv(t)
			pod := newPod(vol("p", corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{tt.proj}}}))
			pod.Spec.SecurityContext = &corev1.PodSecurityContext{FSGroup: tt.fsGroup}
			errs := env.m.SetUp(context.Background(), pod)
			if tt.wantError != "" {
				if len(errs) != 1 || !strings.Contains(errs[0].Error(), tt.wantError) {
					t.Fatalf("errors = %v, want %q", errs, tt.wantError)
				}
				return
			}
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			spec := env.objects.tokenCalls[0].Spec
			if !reflect.DeepEqual(spec.Audiences, tt.wantAud) || *spec.ExpirationSeconds != tt.wantExp {
				t.Errorf("audiences %v expiry %d, want %v %d", spec.Audiences, *spec.ExpirationSeconds, tt.wantAud, tt.wantExp)
			}
			path := filepath.Join(must(env.m.volumeDir(pod.UID, pluginProjected, "p")), "t")
			if got := modeOf(t, path).Perm(); uint32(got) != tt.wantMode {
				t.Errorf("token mode = %o, want %o", got, tt.wantMode)
			}
		})
	}
}

// TestProjectedTokenRefresh drives the fake clock through a one-hour token's life: it is requested
// again once 80% of its lifetime passed, the new token replaces the file, and a failed refresh keeps
// the old token while it is valid.
func TestProjectedTokenRefresh(t *testing.T) {
	env := newTestEnv(t)
	pod := newPod(vol("p", corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		Sources: []corev1.VolumeProjection{tokenProjection("token", "", ptrTo[int64](3600))},
	}}))
	file := filepath.Join(must(env.m.volumeDir(pod.UID, pluginProjected, "p")), "token")
	steps := []struct {
		advance   time.Duration
		failAPI   bool
		wantCalls int
		wantToken string
		wantErr   string
	}{
		{advance: 0, wantCalls: 1, wantToken: "token-1"},
		{advance: 30 * time.Minute, wantCalls: 1, wantToken: "token-1"},
		{advance: 17 * time.Minute, wantCalls: 1, wantToken: "token-1"}, // 47 min: below 80%
		{advance: 2 * time.Minute, wantCalls: 2, wantToken: "token-2"},  // 49 min > 48 min
		{advance: time.Minute, wantCalls: 2, wantToken: "token-2"},
		{advance: 48 * time.Minute, failAPI: true, wantCalls: 3, wantToken: "token-2"}, // refresh fails, old one still valid
		{advance: 20 * time.Minute, failAPI: true, wantCalls: 4, wantToken: "token-2", wantErr: "expired and refresh failed"},
		{advance: 0, wantCalls: 5, wantToken: "token-5"},
	}
	for i, s := range steps {
		env.clock.Step(s.advance)
		env.objects.tokenErr = nil
		if s.failAPI {
			env.objects.tokenErr = errors.New("apiserver down")
		}
		errs := env.m.SetUp(context.Background(), pod)
		if s.wantErr == "" && len(errs) > 0 {
			t.Fatalf("step %d: %v", i, errs)
		}
		if s.wantErr != "" && (len(errs) != 1 || !strings.Contains(errs[0].Error(), s.wantErr)) {
			t.Fatalf("step %d: errors = %v, want %q", i, errs, s.wantErr)
		}
		if got := env.objects.tokenCallCount(); got != s.wantCalls {
			t.Errorf("step %d: CreateToken calls = %d, want %d", i, got, s.wantCalls)
		}
		if got := readFile(t, file); got != s.wantToken {
			t.Errorf("step %d: token file = %q, want %q", i, got, s.wantToken)
		}
	}
}

func TestTokenRefreshAfter24Hours(t *testing.T) {
	exp := int64(48 * 3600)
	issued := testStart
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp}}
	tr.Status.ExpirationTimestamp.Time = issued.Add(48 * time.Hour)
	tests := []struct {
		at   time.Duration
		want bool
	}{{23 * time.Hour, false}, {24*time.Hour + time.Second, true}}
	for _, tt := range tests {
		if got := requiresRefresh(tr, issued.Add(tt.at)); got != tt.want {
			t.Errorf("refresh at %v = %t, want %t", tt.at, got, tt.want)
		}
	}
}

func TestTokenOnlyForPodsOfThisNode(t *testing.T) {
	env := newTestEnv(t)
	pod := newPod(vol("p", corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		Sources: []corev1.VolumeProjection{tokenProjection("token", "", nil)},
	}}))
	pod.Spec.NodeName = "other"
	if errs := env.m.SetUp(context.Background(), pod); len(errs) != 1 || env.objects.tokenCallCount() != 0 {
		t.Errorf("errors = %v, token calls = %d; want one error and no request", errs, env.objects.tokenCallCount())
	}
}

func TestProjectedSourceFailureFailsTheVolume(t *testing.T) {
	env := newTestEnv(t)
	pod := newPod(vol("p", corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
		{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "gone"}}},
		{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "opt"}, Optional: ptrTo(true)}},
	}}}))
	errs := env.m.SetUp(context.Background(), pod)
	if want := `MountVolume.SetUp failed for volume "p" : secret "gone" not found`; len(errs) != 1 || errs[0].Error() != want {
		t.Errorf("errors = %v, want %q", errs, want)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	got := readVolume(t, filepath.Dir(path))
	return got[filepath.Base(path)]
}
