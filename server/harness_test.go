package server

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	certutil "k8s.io/client-go/util/cert"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/runtime"
)

var (
	errNotFoundCRI      = fmt.Errorf("ContainerStatus: %w: no such container", runtime.ErrNotFound)
	errUnimplementedCRI = fmt.Errorf("ListPodSandboxStats: %w", runtime.ErrUnimplemented)
)

const testNode = "node-a"

// env is one server under test with its fakes.
type env struct {
	t       testing.TB
	s       *Server
	ts      *httptest.Server
	clock   *clocktesting.FakeClock
	rt      *fakeRuntime
	pods    *fakePods
	kube    *fake.Clientset
	ca      *testCA
	dir     string
	serving *x509.CertPool

	mu      sync.Mutex
	tokens  map[string]authenticationv1.UserInfo // token -> user
	allowed map[string]bool                      // "user verb subresource" -> allowed
	sars    []authorizationv1.SubjectAccessReviewSpec
	reviews int
}

// newEnv starts a server with webhook authn/authz, a client CA and a self-signed serving certificate.
func newEnv(t testing.TB, mutate ...func(*Options)) *env {
	t.Helper()
	e, o := newEnvOptions(t)
	for _, m := range mutate {
		m(&o)
	}
	s, err := New(o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	s.backoff = wait.Backoff{Steps: 1}
	e.s = s
	e.ts = httptest.NewUnstartedServer(s.handler)
	e.ts.TLS = s.tlsConfig.Clone()
	e.ts.StartTLS()
	t.Cleanup(e.ts.Close)
	e.serving = servingPool(t, s)
	return e
}

// validOptions are options New accepts.
func validOptions(t *testing.T) Options {
	_, o := newEnvOptions(t)
	return o
}

func newEnvOptions(t testing.TB) (*env, Options) {
	t.Helper()
	e := &env{
		t: t, clock: clocktesting.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)),
		rt: newFakeRuntime(), pods: &fakePods{}, kube: fake.NewClientset(), ca: newTestCA(t, "client-ca"),
		dir: t.TempDir(), tokens: map[string]authenticationv1.UserInfo{}, allowed: map[string]bool{},
	}
	e.kube.PrependReactor("create", "tokenreviews", e.tokenReview)
	e.kube.PrependReactor("create", "subjectaccessreviews", e.subjectAccessReview)
	caFile := filepath.Join(e.dir, "ca.crt")
	writeFile(t, caFile, e.ca.certPEM)
	return e, Options{
		Address: "127.0.0.1", CertDir: filepath.Join(e.dir, "pki"), NodeName: testNode,
		Auth: kubeletconfigv1beta1.KubeletAuthentication{
			X509:      kubeletconfigv1beta1.KubeletX509Authentication{ClientCAFile: caFile},
			Webhook:   kubeletconfigv1beta1.KubeletWebhookAuthentication{Enabled: ptr.To(true), CacheTTL: metav1.Duration{Duration: 2 * time.Minute}},
			Anonymous: kubeletconfigv1beta1.KubeletAnonymousAuthentication{Enabled: ptr.To(false)},
		},
		Authz: kubeletconfigv1beta1.KubeletAuthorization{Mode: kubeletconfigv1beta1.KubeletAuthorizationModeWebhook,
			Webhook: kubeletconfigv1beta1.KubeletWebhookAuthorization{
				CacheAuthorizedTTL: metav1.Duration{Duration: 5 * time.Minute}, CacheUnauthorizedTTL: metav1.Duration{Duration: 30 * time.Second}}},
		Kube: e.kube, Runtime: e.rt, Pods: e.pods, Clock: e.clock, PodLogsDir: filepath.Join(e.dir, "pods"),
		Configz: map[string]string{"kind": "KubeletConfiguration"},
	}
}

// servingPool trusts the server's certificate (its CA, for the self-signed kind).
func servingPool(t testing.TB, s *Server) *x509.CertPool {
	pool := x509.NewCertPool()
	for _, c := range s.tlsConfig.Certificates[0].Certificate {
		cert, err := x509.ParseCertificate(c)
		if err != nil {
			t.Fatal(err)
		}
		pool.AddCert(cert)
	}
	certFile, _, _ := s.servingCertFiles()
	if certs, err := certutil.CertsFromFile(certFile); err == nil {
		for _, c := range certs {
			pool.AddCert(c)
		}
	}
	return pool
}

// client is an HTTPS client that verifies the server and presents cert, if any.
func (e *env) client(cert *tls.Certificate) *http.Client {
	cfg := &tls.Config{RootCAs: e.serving, ServerName: testNode, MinVersion: tls.VersionTLS12}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 30 * time.Second}
}

// do sends a request with a bearer token (if not empty) and returns the status and body.
func (e *env) do(method, path, token string) (int, string) {
	return e.doWith(e.client(nil), method, path, token, nil)
}

func (e *env) doWith(c *http.Client, method, path, token string, body io.Reader) (int, string) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.ts.URL+path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// addUser makes token authenticate as name, allowed "verb subresource" pairs on the node.
func (e *env) addUser(token, name string, allowed ...string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.tokens[token] = authenticationv1.UserInfo{Username: name, UID: "uid-" + name, Groups: []string{"team"}}
	e.allow(name, allowed...)
}

// allow lets name do "verb subresource" (caller holds no lock).
func (e *env) allow(name string, allowed ...string) {
	for _, a := range allowed {
		e.allowed[name+" "+a] = true
	}
}

func (e *env) tokenReview(action k8stesting.Action) (bool, apiruntime.Object, error) {
	tr := action.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview).DeepCopy()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.reviews++
	if u, ok := e.tokens[tr.Spec.Token]; ok {
		tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: u}
	}
	return true, tr, nil
}

func (e *env) subjectAccessReview(action k8stesting.Action) (bool, apiruntime.Object, error) {
	sar := action.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview).DeepCopy()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.sars = append(e.sars, sar.Spec)
	ra := sar.Spec.ResourceAttributes
	valid := ra != nil && ra.Resource == "nodes" && ra.Name == testNode && ra.Version == "v1"
	sar.Status.Allowed = valid && e.allowed[sar.Spec.User+" "+ra.Verb+" "+ra.Subresource]
	return true, sar, nil
}

func (e *env) sarCount() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.sars)
}

// testCA signs client certificates.
type testCA struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
}

func newTestCA(t testing.TB, cn string) *testCA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// clientCert issues a client certificate for CN cn in organizations orgs, valid from notBefore to notAfter.
func (ca *testCA) clientCert(t *testing.T, cn string, orgs []string, notBefore, notAfter time.Time) *tls.Certificate {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn, Organization: orgs},
		NotBefore: notBefore, NotAfter: notAfter, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func writeFile(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// fakePods is the node's pods.
type fakePods struct {
	mu   sync.Mutex
	pods []corev1.Pod
}

func (f *fakePods) List(context.Context) ([]corev1.Pod, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]corev1.Pod(nil), f.pods...), nil
}

func (f *fakePods) add(p corev1.Pod) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pods = append(f.pods, p)
}

// fakeRuntime is an in-memory CRI for the server: containers, sandboxes, stats and streaming URLs.
type fakeRuntime struct {
	mu           sync.Mutex
	containers   map[string]*runtimeapi.Container
	statuses     map[string]*runtimeapi.ContainerStatus
	sandboxes    []*runtimeapi.PodSandbox
	stats        []*runtimeapi.ContainerStats
	sandboxStats []*runtimeapi.PodSandboxStats
	imageFs      *runtimeapi.ImageFsInfoResponse
	streamURL    string
	// streamer, when set, answers Exec, Attach and PortForward with its URLs (a real CRI streaming server).
	streamer interface {
		GetExec(*runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error)
		GetPortForward(*runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error)
	}
	execs    []*runtimeapi.ExecRequest
	attaches []*runtimeapi.AttachRequest
	forwards []*runtimeapi.PortForwardRequest
	execSync func(id string, cmd []string) *runtimeapi.ExecSyncResponse
	reopen   func(id string) error
	reopened []string
}

func newFakeRuntime() *fakeRuntime {
	return &fakeRuntime{containers: map[string]*runtimeapi.Container{}, statuses: map[string]*runtimeapi.ContainerStatus{}}
}

// addContainer registers a container attempt of pod (namespace/name/uid) with its log path.
func (f *fakeRuntime) addContainer(id, sandbox string, pod *corev1.Pod, name string, state runtimeapi.ContainerState, created int64, logPath string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	labels := map[string]string{
		"io.kubernetes.pod.name": pod.Name, "io.kubernetes.pod.namespace": pod.Namespace,
		"io.kubernetes.pod.uid": string(pod.UID), "io.kubernetes.container.name": name,
	}
	md := &runtimeapi.ContainerMetadata{Name: name}
	f.containers[id] = &runtimeapi.Container{Id: id, PodSandboxId: sandbox, Metadata: md, State: state, CreatedAt: created, Labels: labels}
	f.statuses[id] = &runtimeapi.ContainerStatus{Id: id, Metadata: md, State: state, CreatedAt: created, Labels: labels, LogPath: logPath}
}

func (f *fakeRuntime) setState(id string, state runtimeapi.ContainerState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.containers[id].State = state
	f.statuses[id].State = state
}

func (f *fakeRuntime) ListContainers(_ context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*runtimeapi.Container
	for _, c := range f.containers {
		if filter.GetState() != nil && filter.GetState().GetState() != c.State {
			continue
		}
		if matches(c.Labels, filter.GetLabelSelector()) {
			out = append(out, proto.Clone(c).(*runtimeapi.Container))
		}
	}
	return out, nil
}

func matches(labels, selector map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func (f *fakeRuntime) ListPodSandbox(_ context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*runtimeapi.PodSandbox
	for _, s := range f.sandboxes {
		if filter.GetState() != nil && filter.GetState().GetState() != s.State {
			continue
		}
		if matches(s.Labels, filter.GetLabelSelector()) {
			out = append(out, s)
		}
	}
	return out, nil
}

func (f *fakeRuntime) ContainerStatus(_ context.Context, id string, _ bool) (*runtimeapi.ContainerStatusResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st, ok := f.statuses[id]
	if !ok {
		return nil, errNotFoundCRI
	}
	return &runtimeapi.ContainerStatusResponse{Status: proto.Clone(st).(*runtimeapi.ContainerStatus)}, nil
}

func (f *fakeRuntime) ListContainerStats(context.Context, *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stats, nil
}

func (f *fakeRuntime) ListPodSandboxStats(context.Context, *runtimeapi.PodSandboxStatsFilter) ([]*runtimeapi.PodSandboxStats, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.sandboxStats == nil {
		return nil, errUnimplementedCRI
	}
	return f.sandboxStats, nil
}

func (f *fakeRuntime) ImageFsInfo(context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.imageFs == nil {
		return &runtimeapi.ImageFsInfoResponse{}, nil
	}
	return f.imageFs, nil
}

func (f *fakeRuntime) Exec(_ context.Context, req *runtimeapi.ExecRequest) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.execs = append(f.execs, req)
	if f.streamer != nil {
		resp, err := f.streamer.GetExec(req)
		return resp.GetUrl(), err
	}
	return f.streamURL + "/exec/token", nil
}

func (f *fakeRuntime) Attach(_ context.Context, req *runtimeapi.AttachRequest) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.attaches = append(f.attaches, req)
	return f.streamURL + "/attach/token", nil
}

func (f *fakeRuntime) PortForward(_ context.Context, req *runtimeapi.PortForwardRequest) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.forwards = append(f.forwards, req)
	if f.streamer != nil {
		resp, err := f.streamer.GetPortForward(req)
		return resp.GetUrl(), err
	}
	return f.streamURL + "/portforward/token", nil
}

func (f *fakeRuntime) ExecSync(_ context.Context, id string, cmd []string, _ time.Duration) (*runtimeapi.ExecSyncResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.execSync(id, cmd), nil
}

func (f *fakeRuntime) ReopenContainerLog(_ context.Context, id string) error {
	f.mu.Lock()
	f.reopened = append(f.reopened, id)
	reopen := f.reopen
	f.mu.Unlock()
	if reopen != nil {
		return reopen(id)
	}
	return nil
}

func (f *fakeRuntime) reopenedIDs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.reopened...)
}

// testPod is a pod with one container "app" in namespace default.
func testPod(name, uid string) corev1.Pod {
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID(uid)},
		Spec:       corev1.PodSpec{NodeName: testNode, Containers: []corev1.Container{{Name: "app", Image: "busybox"}}},
	}
}

func contains(t *testing.T, got, want string) {
	t.Helper()
	if !strings.Contains(got, want) {
		t.Errorf("got %q, want it to contain %q", got, want)
	}
}
