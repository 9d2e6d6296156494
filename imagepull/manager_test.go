package imagepull

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	clocktesting "k8s.io/utils/clock/testing"
)

var (
	secretA    = Secret{UID: "uid-a", Namespace: "team-a", Name: "pull", CredentialHash: "hash-a"}
	secretB    = Secret{UID: "uid-b", Namespace: "team-b", Name: "pull", CredentialHash: "hash-b"}
	nodeAccess = &kubeletconfigv1beta1.ImagePullCredentials{NodePodsAccessible: true}
)

func withSecret(s Secret) *kubeletconfigv1beta1.ImagePullCredentials {
	return &kubeletconfigv1beta1.ImagePullCredentials{KubernetesSecrets: []Secret{s}}
}

func newTestManager(t *testing.T, policy kubeletconfigv1beta1.ImagePullCredentialsVerificationPolicy) (*Manager, *FileRecords, string) {
	t.Helper()
	root := t.TempDir()
	records, err := NewFileRecords(root)
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPolicy(policy, nil)
	if err != nil {
		t.Fatal(err)
	}
	return NewManager(records, p, clocktesting.NewFakePassiveClock(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))), records, root
}

func secrets(s ...Secret) func() ([]Secret, error) {
	return func() ([]Secret, error) { return s, nil }
}

// pulled records a finished pull of image as ref with creds, as the puller does.
func pulled(t *testing.T, m *Manager, image, ref string, creds *kubeletconfigv1beta1.ImagePullCredentials) {
	t.Helper()
	if err := m.RecordPullIntent(image); err != nil {
		t.Fatal(err)
	}
	m.RecordPulled(context.Background(), image, ref, creds)
}

func TestMustPull(t *testing.T) {
	const image, ref = "registry.example/private/app:1", "sha256:app"
	tests := []struct {
		name   string
		policy kubeletconfigv1beta1.ImagePullCredentialsVerificationPolicy
		setup  func(t *testing.T, m *Manager)
		pod    []Secret
		must   bool
	}{
		{name: "preloaded image, default policy", policy: kubeletconfigv1beta1.NeverVerifyPreloadedImages, must: false},
		{name: "preloaded image, AlwaysVerify", policy: kubeletconfigv1beta1.AlwaysVerify, must: true},
		{name: "pulled with a secret, pod without it", policy: kubeletconfigv1beta1.NeverVerifyPreloadedImages,
			setup: func(t *testing.T, m *Manager) { pulled(t, m, image, ref, withSecret(secretA)) }, must: true},
		{name: "pulled with a secret, pod with another", policy: kubeletconfigv1beta1.NeverVerifyPreloadedImages,
			setup: func(t *testing.T, m *Manager) { pulled(t, m, image, ref, withSecret(secretA)) }, pod: []Secret{secretB}, must: true},
		{name: "pulled with a secret, pod with the same", policy: kubeletconfigv1beta1.NeverVerifyPreloadedImages,
			setup: func(t *testing.T, m *Manager) { pulled(t, m, image, ref, withSecret(secretA)) }, pod: []Secret{secretB, secretA}, must: false},
		{name: "same credentials in another secret", policy: kubeletconfigv1beta1.NeverVerifyPreloadedImages,
			setup: func(t *testing.T, m *Manager) { pulled(t, m, image, ref, withSecret(secretA)) },
			pod:   []Secret{{UID: "uid-c", Namespace: "team-c", Name: "copy", CredentialHash: "hash-a"}}, must: false},
		{name: "same secret, rotated content", policy: kubeletconfigv1beta1.NeverVerifyPreloadedImages,
			setup: func(t *testing.T, m *Manager) { pulled(t, m, image, ref, withSecret(secretA)) },
			pod:   []Secret{{UID: "uid-a", Namespace: "team-a", Name: "pull", CredentialHash: "hash-new"}}, must: false},
		{name: "recreated secret of the same name", policy: kubeletconfigv1beta1.NeverVerifyPreloadedImages,
			setup: func(t *testing.T, m *Manager) { pulled(t, m, image, ref, withSecret(secretA)) },
			pod:   []Secret{{UID: "uid-a2", Namespace: "team-a", Name: "pull", CredentialHash: "hash-other"}}, must: true},
		{name: "pulled anonymously", policy: kubeletconfigv1beta1.AlwaysVerify,
			setup: func(t *testing.T, m *Manager) { pulled(t, m, image, ref, nodeAccess) }, must: false},
		{name: "pulled under another name of the image", policy: kubeletconfigv1beta1.NeverVerifyPreloadedImages,
			setup: func(t *testing.T, m *Manager) { pulled(t, m, "registry.example/other:1", ref, nodeAccess) }, must: true},
		{name: "pulled by tag, asked by digest", policy: kubeletconfigv1beta1.NeverVerifyPreloadedImages,
			setup: func(t *testing.T, m *Manager) {
				pulled(t, m, "registry.example/private/app@sha256:"+sha, ref, withSecret(secretA))
			},
			pod: []Secret{secretA}, must: false},
		{name: "pull in flight", policy: kubeletconfigv1beta1.NeverVerifyPreloadedImages,
			setup: func(t *testing.T, m *Manager) {
				if err := m.RecordPullIntent(image); err != nil {
					t.Fatal(err)
				}
			}, must: true},
		{name: "NeverVerify", policy: kubeletconfigv1beta1.NeverVerify,
			setup: func(t *testing.T, m *Manager) { pulled(t, m, image, ref, withSecret(secretA)) }, must: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, _, _ := newTestManager(t, tt.policy)
			if tt.setup != nil {
				tt.setup(t, m)
			}
			must, err := m.MustPull(context.Background(), image, ref, secrets(tt.pod...))
			if err != nil || must != tt.must {
				t.Errorf("MustPull = %v, %v; want %v", must, err, tt.must)
			}
		})
	}
}

func TestMustPullAsksForSecretsOnlyWhenNeeded(t *testing.T) {
	m, _, _ := newTestManager(t, kubeletconfigv1beta1.NeverVerifyPreloadedImages)
	asked := false
	ask := func() ([]Secret, error) { asked = true; return nil, errors.New("API down") }
	if must, err := m.MustPull(context.Background(), "app:1", "sha256:x", ask); must || err != nil || asked {
		t.Errorf("preloaded image: MustPull = %v, %v, secrets asked %v", must, err, asked)
	}
	pulled(t, m, "app:1", "sha256:x", withSecret(secretA))
	if must, err := m.MustPull(context.Background(), "app:1", "sha256:x", ask); !must || err == nil || !asked {
		t.Errorf("MustPull = %v, %v, secrets asked %v; want true and the lookup error", must, err, asked)
	}
	if must, _ := m.MustPull(context.Background(), "app:1", "", secrets()); !must {
		t.Error("an image without a reference was not verified")
	}
}

func TestMatchByHashOrCoordinatesIsRecorded(t *testing.T) {
	m, records, _ := newTestManager(t, kubeletconfigv1beta1.NeverVerifyPreloadedImages)
	pulled(t, m, "app:1", "sha256:x", withSecret(secretA))
	copyOfA := Secret{UID: "uid-c", Namespace: "team-c", Name: "copy", CredentialHash: "hash-a"}
	if must, _ := m.MustPull(context.Background(), "app:1", "sha256:x", secrets(copyOfA)); must {
		t.Fatal("a secret with the same credentials was not accepted")
	}
	rec, _, err := records.GetRecord("sha256:x")
	if err != nil {
		t.Fatal(err)
	}
	if got := rec.CredentialMapping["app"].KubernetesSecrets; len(got) != 2 || got[0] != secretA || got[1] != copyOfA {
		t.Errorf("recorded secrets %v, want team-a's and team-c's (sorted)", got)
	}
}

func TestRecordsAreTheKubeletsFiles(t *testing.T) {
	m, _, root := newTestManager(t, kubeletconfigv1beta1.NeverVerifyPreloadedImages)
	if err := m.RecordPullIntent("app:1"); err != nil {
		t.Fatal(err)
	}
	intent := filepath.Join(root, "image_manager/pulling", fileName("app:1"))
	data, err := os.ReadFile(intent)
	if err != nil {
		t.Fatalf("pull intent file: %v", err)
	}
	if !strings.Contains(string(data), `"kind":"ImagePullIntent","apiVersion":"kubelet.config.k8s.io/v1beta1","image":"app:1"`) {
		t.Errorf("intent file %s", data)
	}
	if !strings.HasPrefix(fileName("app:1"), "sha256-") || len(fileName("app:1")) != len("sha256-")+64 {
		t.Errorf("file name %q", fileName("app:1"))
	}
	m.RecordPulled(context.Background(), "app:1", "sha256:x", withSecret(secretA))
	if _, err := os.Stat(intent); !os.IsNotExist(err) {
		t.Error("the pull intent was kept after the pull")
	}
	data, err = os.ReadFile(filepath.Join(root, "image_manager/pulled", fileName("sha256:x")))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"kind":"ImagePulledRecord","apiVersion":"kubelet.config.k8s.io/v1beta1","lastUpdatedTime":"2026-03-01T00:00:00Z",` +
		`"imageRef":"sha256:x","credentialMapping":{"app":{"kubernetesSecrets":[{"uid":"uid-a","namespace":"team-a","name":"pull","credentialHash":"hash-a"}]}}}`
	if strings.TrimSpace(string(data)) != want {
		t.Errorf("record file\n%s\nwant\n%s", data, want)
	}
}

func TestIntentsCountConcurrentPulls(t *testing.T) {
	m, records, _ := newTestManager(t, kubeletconfigv1beta1.NeverVerifyPreloadedImages)
	for range 2 {
		if err := m.RecordPullIntent("app:1"); err != nil {
			t.Fatal(err)
		}
	}
	m.RecordPullFailed(context.Background(), "app:1")
	if ok, _ := records.IntentExists("app:1"); !ok {
		t.Fatal("the intent went with the first of two pulls")
	}
	m.RecordPullFailed(context.Background(), "app:1")
	if ok, _ := records.IntentExists("app:1"); ok {
		t.Error("the intent outlived its pulls")
	}
}

func TestInitializeTurnsLeftIntentsIntoRecords(t *testing.T) {
	_, records, _ := newTestManager(t, kubeletconfigv1beta1.NeverVerifyPreloadedImages)
	for _, img := range []string{"app:1", "gone:1"} {
		if err := records.WriteIntent(img); err != nil {
			t.Fatal(err)
		}
	}
	// A restart: a new manager over the same files.
	p, _ := NewPolicy(kubeletconfigv1beta1.NeverVerifyPreloadedImages, nil)
	restarted := NewManager(records, p, clocktesting.NewFakePassiveClock(time.Now()))
	if must, _ := restarted.MustPull(context.Background(), "app:1", "sha256:x", secrets()); !must {
		t.Error("an image with a pull intent left on disk was used unverified")
	}
	restarted.Initialize(context.Background(), []Image{{ID: "sha256:x", Tags: []string{"app:1", "registry/app@sha256:" + sha}}})
	if ok, _ := records.IntentExists("app:1"); ok {
		t.Error("the intent of a pulled image was kept")
	}
	if ok, _ := records.IntentExists("gone:1"); !ok {
		t.Error("the intent of an image the runtime lacks was dropped")
	}
	rec, found, err := records.GetRecord("sha256:x")
	if err != nil || !found || len(rec.CredentialMapping) != 0 {
		t.Errorf("record %+v found %v err %v, want one without credentials", rec, found, err)
	}
	if must, _ := restarted.MustPull(context.Background(), "app:1", "sha256:x", secrets(secretA)); !must {
		t.Error("an image pulled with unknown credentials was used unverified")
	}
}

func TestCorruptRecordMeansVerify(t *testing.T) {
	m, _, root := newTestManager(t, kubeletconfigv1beta1.NeverVerifyPreloadedImages)
	if err := os.WriteFile(filepath.Join(root, "image_manager/pulled", fileName("sha256:x")), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if must, _ := m.MustPull(context.Background(), "app:1", "sha256:x", secrets()); !must {
		t.Error("an unreadable record let the image be used unverified")
	}
}
