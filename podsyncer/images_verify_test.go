package podsyncer

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodelet/nodelet/imagepull"
)

// fakeRegistry is an image service whose registry lets a pull through only with the right password.
type fakeRegistry struct {
	mu       sync.Mutex
	present  map[string]string // image → ID, what the node holds
	password map[string]string // image → password the registry asks ("" for a public image)
	pulls    []*runtimeapi.AuthConfig
	gate     chan struct{} // when set, a pull waits for it to close
}

func (f *fakeRegistry) ImageStatus(_ context.Context, img *runtimeapi.ImageSpec) (*runtimeapi.Image, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if id, ok := f.present[img.Image]; ok {
		return &runtimeapi.Image{Id: id, Size: 10}, nil
	}
	return nil, nil
}

func (f *fakeRegistry) PullImage(_ context.Context, img *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, _ *runtimeapi.PodSandboxConfig) (string, error) {
	if f.gate != nil {
		<-f.gate
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pulls = append(f.pulls, auth)
	if want := f.password[img.Image]; want != "" && auth.GetPassword() != want {
		return "", errors.New("pull access denied, repository does not exist or may require authorization")
	}
	id := "sha256:" + strings.ReplaceAll(img.Image, "/", "_")
	f.present[img.Image] = id
	return id, nil
}

func (f *fakeRegistry) pullCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.pulls)
}

type verifyEnv struct {
	t        *testing.T
	reg      *fakeRegistry
	puller   *imagePuller
	events   *record.FakeRecorder
	notified chan string
}

const privateImage = "registry.example/private/app:1"

func newVerifyEnv(t *testing.T, policy kubeletconfigv1beta1.ImagePullCredentialsVerificationPolicy) *verifyEnv {
	t.Helper()
	records, err := imagepull.NewFileRecords(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p, err := imagepull.NewPolicy(policy, nil)
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
	e := &verifyEnv{t: t, reg: &fakeRegistry{present: map[string]string{}, password: map[string]string{privateImage: "s3cret"}},
		events: record.NewFakeRecorder(100), notified: make(chan string, 10)}
	e.puller = newImagePuller(e.reg, clk, 2, e.events, imagepull.NewManager(records, p, clk), func(k string) { e.notified <- k })
	return e
}

func verifyPod(ns string, policy corev1.PullPolicy) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app", UID: types.UID("uid-" + ns)},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: privateImage, ImagePullPolicy: policy}}}}
}

func secretCreds(ns, password string) pullCredentials {
	s := imagepull.Secret{UID: "secret-" + ns, Namespace: ns, Name: "pull", CredentialHash: credentialHash(dockerAuth{Username: "u", Password: password})}
	return pullCredentials{auth: &runtimeapi.AuthConfig{Username: "u", Password: password}, source: &s, secrets: []imagepull.Secret{s}}
}

// ensure runs Ensure until the container has an image or a final answer, waiting for pulls it starts.
func (e *verifyEnv) ensure(pod *corev1.Pod, creds pullCredentials) imageResult {
	e.t.Helper()
	key := pod.Namespace + "/" + pod.Name
	for range 3 {
		res := e.puller.Ensure(context.Background(), key, pod, &pod.Spec.Containers[0], func() pullCredentials { return creds }, nil)
		if res.waiting == nil || res.waiting.Reason != "ContainerCreating" {
			return res
		}
		select {
		case <-e.notified:
		case <-time.After(10 * time.Second):
			e.t.Fatal("the pull never ended")
		}
	}
	e.t.Fatal("no answer after the pull")
	return imageResult{}
}

func (e *verifyEnv) lastEvent() string {
	var last string
	for {
		select {
		case ev := <-e.events.Events:
			last = ev
		default:
			return last
		}
	}
}

func TestImageOnTheNodeIsCheckedAgainstThePodsCredentials(t *testing.T) {
	e := newVerifyEnv(t, kubeletconfigv1beta1.NeverVerifyPreloadedImages)
	owner := secretCreds("team-a", "s3cret")
	if res := e.ensure(verifyPod("team-a", corev1.PullIfNotPresent), owner); res.ref == "" {
		t.Fatalf("the owner's pull: %+v", res.waiting)
	}
	// Another namespace, no pull secret: the image is on the node, but the registry must be asked.
	res := e.ensure(verifyPod("team-b", corev1.PullIfNotPresent), pullCredentials{})
	if res.ref != "" || res.waiting == nil || res.waiting.Reason != reasonErrImagePull {
		t.Fatalf("a pod without the credentials got the image: %+v %+v", res.ref, res.waiting)
	}
	if got := e.reg.pulls[len(e.reg.pulls)-1]; got != nil {
		t.Errorf("the verification pull used credentials %v, want none (the pod's)", got)
	}
	// Never: refused as if the image were absent.
	res = e.ensure(verifyPod("team-c", corev1.PullNever), pullCredentials{})
	if res.waiting == nil || res.waiting.Reason != reasonErrImageNeverPull ||
		res.waiting.Message != `Container image "`+privateImage+`" is not present with pull policy of Never` {
		t.Errorf("Never without credentials = %+v", res.waiting)
	}
	// The owner again: used from the node, no pull.
	pulls := e.reg.pullCount()
	e.lastEvent()
	if res := e.ensure(verifyPod("team-a", corev1.PullIfNotPresent), owner); res.ref == "" || e.reg.pullCount() != pulls {
		t.Errorf("the owner's second use: %+v, pulls %d → %d", res.waiting, pulls, e.reg.pullCount())
	}
	if ev := e.lastEvent(); !strings.Contains(ev, "already present on machine and can be accessed by the pod") {
		t.Errorf("event %q", ev)
	}
	// The same credentials under another secret, in Never: accepted by content.
	if res := e.ensure(verifyPod("team-d", corev1.PullNever), secretCreds("team-d", "s3cret")); res.ref == "" {
		t.Errorf("the same credentials in another secret were refused: %+v", res.waiting)
	}
}

func TestVerificationPullWithTheRightCredentialsRecordsThem(t *testing.T) {
	e := newVerifyEnv(t, kubeletconfigv1beta1.NeverVerifyPreloadedImages)
	if res := e.ensure(verifyPod("team-a", corev1.PullIfNotPresent), secretCreds("team-a", "s3cret")); res.ref == "" {
		t.Fatal(res.waiting)
	}
	other := secretCreds("team-b", "s3cret-too") // a different secret with the wrong password
	other.auth.Password = "s3cret"               // ... that the registry accepts anyway (say, a second account)
	if res := e.ensure(verifyPod("team-b", corev1.PullIfNotPresent), other); res.ref == "" {
		t.Fatal(res.waiting)
	}
	pulls := e.reg.pullCount()
	if res := e.ensure(verifyPod("team-b", corev1.PullNever), other); res.ref == "" || e.reg.pullCount() != pulls {
		t.Errorf("team-b's verified credentials were not recorded: %+v", res.waiting)
	}
}

func TestPreloadedImagesAndAnonymousPulls(t *testing.T) {
	e := newVerifyEnv(t, kubeletconfigv1beta1.NeverVerifyPreloadedImages)
	e.reg.present["registry.example/preloaded:1"] = "sha256:pre"
	pod := verifyPod("team-a", corev1.PullNever)
	pod.Spec.Containers[0].Image = "registry.example/preloaded:1"
	if res := e.ensure(pod, pullCredentials{}); res.ref != "sha256:pre" {
		t.Errorf("a preloaded image under the default policy: %+v", res.waiting)
	}
	e = newVerifyEnv(t, kubeletconfigv1beta1.AlwaysVerify)
	e.reg.present["registry.example/preloaded:1"] = "sha256:pre"
	if res := e.ensure(pod, pullCredentials{}); res.waiting == nil || res.waiting.Reason != reasonErrImageNeverPull {
		t.Errorf("a preloaded image under AlwaysVerify with Never: %+v", res)
	}
	pod.Spec.Containers[0].ImagePullPolicy = corev1.PullIfNotPresent
	if res := e.ensure(pod, pullCredentials{}); res.ref == "" {
		t.Fatalf("an anonymous verification pull of a public image: %+v", res.waiting)
	}
	pod.Spec.Containers[0].ImagePullPolicy = corev1.PullNever
	pod.Namespace = "team-z"
	if res := e.ensure(pod, pullCredentials{}); res.ref == "" {
		t.Errorf("an image pulled anonymously was refused to another pod: %+v", res.waiting)
	}
}

func TestWithoutRecordsImagesOnTheNodeAreUsed(t *testing.T) {
	e := newVerifyEnv(t, kubeletconfigv1beta1.NeverVerifyPreloadedImages)
	e.puller.records = nil
	e.reg.present[privateImage] = "sha256:app"
	if res := e.ensure(verifyPod("team-b", corev1.PullNever), pullCredentials{}); res.ref != "sha256:app" {
		t.Errorf("gate off: %+v", res.waiting)
	}
	if ev := e.lastEvent(); !strings.HasSuffix(ev, `Container image "`+privateImage+`" already present on machine`) {
		t.Errorf("event %q", ev)
	}
}

func TestPullsWithDifferentCredentialsAreNotShared(t *testing.T) {
	e := newVerifyEnv(t, kubeletconfigv1beta1.NeverVerifyPreloadedImages)
	a, b := verifyPod("team-a", corev1.PullIfNotPresent), verifyPod("team-b", corev1.PullIfNotPresent)
	e.reg.gate = make(chan struct{}) // hold the registry so both pulls are in flight together
	ra := e.puller.Ensure(context.Background(), "team-a/app", a, &a.Spec.Containers[0], func() pullCredentials { return secretCreds("team-a", "s3cret") }, nil)
	rb := e.puller.Ensure(context.Background(), "team-b/app", b, &b.Spec.Containers[0], func() pullCredentials { return pullCredentials{} }, nil)
	close(e.reg.gate)
	if ra.waiting.Reason != "ContainerCreating" || rb.waiting.Reason != "ContainerCreating" {
		t.Fatalf("%+v %+v", ra.waiting, rb.waiting)
	}
	for range 2 {
		<-e.notified
	}
	if res := e.ensure(b, pullCredentials{}); res.ref != "" {
		t.Error("the pod without credentials shared the pull of the pod with them")
	}
	if res := e.ensure(a, secretCreds("team-a", "s3cret")); res.ref == "" {
		t.Errorf("the pod with credentials: %+v", res.waiting)
	}
}

func TestCredentialHashIsTheKubelets(t *testing.T) {
	// sha256 of {"username":"u","password":"p"}: the kubelet's hashAuthConfig of the same secret entry.
	const want = "edbd57ca9372e64eb1c9070ecf3a049ac553596b0529acf034c7a71d4e618e88"
	if got := credentialHash(dockerAuth{Username: "u", Password: "p", Auth: "ignored", IdentityToken: "ignored"}); got != want {
		t.Errorf("credentialHash = %s, want %s", got, want)
	}
	if credentialHash(dockerAuth{Username: "u", Password: "q"}) == want {
		t.Error("different passwords hash the same")
	}
}
