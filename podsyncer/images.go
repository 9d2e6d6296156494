package podsyncer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/distribution/reference"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/clock"

	"github.com/nodelet/nodelet/imagepull"
	"github.com/nodelet/nodelet/podstatus"
)

// pullCredentials are a pod's credentials for one image: the first pull secret matching the image's
// registry (auth, from source) is used to pull; every matching one (secrets) may show that an image
// already on the node was pulled with credentials the pod holds.
type pullCredentials struct {
	auth    *runtimeapi.AuthConfig
	source  *imagepull.Secret // nil: an anonymous pull
	secrets []imagepull.Secret
}

// pulledWith is what a pull with these credentials is recorded as: the secret used, or, for an anonymous
// pull, an image any pod on the node may use.
func (c pullCredentials) pulledWith() *kubeletconfigv1beta1.ImagePullCredentials {
	if c.source == nil {
		return &kubeletconfigv1beta1.ImagePullCredentials{NodePodsAccessible: true}
	}
	return &kubeletconfigv1beta1.ImagePullCredentials{KubernetesSecrets: []imagepull.Secret{*c.source}}
}

// id names the credentials a pull uses, so pods with different credentials never share a pull.
func (c pullCredentials) id() string {
	if c.source == nil {
		return ""
	}
	return strings.Join([]string{c.source.Namespace, c.source.Name, c.source.UID, c.source.CredentialHash}, "/")
}

// The kubelet's image reasons.
const (
	reasonErrImagePull      = "ErrImagePull"
	reasonImagePullBackOff  = "ImagePullBackOff"
	reasonErrImageNeverPull = "ErrImageNeverPull"
	reasonInvalidImageName  = "InvalidImageName"
)

// imageResult is the outcome of ensuring a container's image.
type imageResult struct {
	ref     string             // the image reference to run, when ready
	waiting *podstatus.Waiting // why the container cannot start yet (pull running, back-off, error)
	retryIn time.Duration      // when a back-off ends
}

// pull is one image pull in flight; pods waiting for it are told when it ends.
type pull struct {
	done    chan struct{}
	ref     string
	err     error
	elapsed time.Duration
	size    uint64
}

// imagePuller pulls images in the background, at most `parallel` at once, never blocking the caller:
// Ensure starts a pull and returns; notify is called with each waiting pod's key when it ends.
// With a recorder, an image already on the node is used only if the recorder says the pod may (else it is
// pulled again with the pod's credentials, or refused under imagePullPolicy Never), and each pull is
// recorded with the credentials it used.
type imagePuller struct {
	images   ImageService
	clock    clock.Clock
	backoff  *backoff
	sem      chan struct{}
	notify   func(podKey string)
	recorder EventRecorder
	records  PullRecorder // nil: images on the node are used without verification
	// pullDuration, once set, observes each successful pull (kubelet_image_pull_duration_seconds).
	pullDuration atomic.Pointer[prometheus.HistogramVec]

	mu       sync.Mutex
	inflight map[string]*pull           // by pull key (image, and with records the credentials)
	waiters  map[string]map[string]bool // pull key → pod keys
	results  map[string]*pull           // finished pulls by pod key + image, collected by Ensure
}

func newImagePuller(images ImageService, clk clock.Clock, parallel int, rec EventRecorder, records PullRecorder, notify func(string)) *imagePuller {
	if parallel <= 0 {
		parallel = 1
	}
	return &imagePuller{
		images: images, clock: clk, backoff: newBackoff(clk, backoffInitial, backoffMax),
		sem: make(chan struct{}, parallel), notify: notify, recorder: rec, records: records,
		inflight: map[string]*pull{}, waiters: map[string]map[string]bool{}, results: map[string]*pull{},
	}
}

// errImageNeverPull and friends carry the kubelet's waiting reasons.
var errInvalidImageName = errors.New("invalid image name")

// normalizeImage applies the default tag and registry the way the kubelet does before asking the runtime.
func normalizeImage(image string) (string, error) {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return "", fmt.Errorf("%w: couldn't parse image name %q: %w", errInvalidImageName, image, err)
	}
	return reference.TagNameOnly(named).String(), nil
}

// Ensure makes the container's image available per its pull policy. It never blocks on a pull. creds
// is called at most once, when the pod's credentials are needed.
func (p *imagePuller) Ensure(ctx context.Context, podKey string, pod *corev1.Pod, c *corev1.Container,
	creds func() pullCredentials, sandbox *runtimeapi.PodSandboxConfig) imageResult {
	creds = sync.OnceValue(creds)
	image, err := normalizeImage(c.Image)
	if err != nil {
		msg := fmt.Sprintf("Failed to apply default image tag %q: %v", c.Image, err)
		p.event(pod, c, corev1.EventTypeWarning, reasonInvalidImageName, "Error: "+msg)
		return imageResult{waiting: &podstatus.Waiting{Reason: reasonInvalidImageName, Message: msg}}
	}
	if res, done := p.collect(podKey, image); done {
		return p.finish(pod, c, podKey, image, res)
	}
	if c.ImagePullPolicy != corev1.PullAlways {
		present, err := p.images.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: image, UserSpecifiedImage: c.Image})
		if err != nil {
			return imageResult{waiting: &podstatus.Waiting{Reason: reasonErrImagePull, Message: err.Error()}}
		}
		if present != nil {
			if res, use := p.usePresent(ctx, pod, c, present.Id, creds); use {
				return res
			}
		}
		if c.ImagePullPolicy == corev1.PullNever {
			// Not on the node, or on it but not for this pod: the kubelet says the same in both cases so
			// as not to reveal an image the pod may not use.
			msg := fmt.Sprintf("Container image %q is not present with pull policy of Never", c.Image)
			p.event(pod, c, corev1.EventTypeWarning, reasonErrImageNeverPull, msg)
			return imageResult{waiting: &podstatus.Waiting{Reason: reasonErrImageNeverPull, Message: msg}}
		}
	}
	bkey := podKey + "/" + image
	if wait := p.backoff.InBackOffSinceUpdate(bkey); wait > 0 {
		msg := fmt.Sprintf("Back-off pulling image %q", c.Image)
		p.event(pod, c, corev1.EventTypeNormal, "BackOff", msg)
		return imageResult{waiting: &podstatus.Waiting{Reason: reasonImagePullBackOff, Message: msg}, retryIn: wait}
	}
	res, err := p.start(pod, c, podKey, image, c.Image, creds(), sandbox)
	if err != nil {
		return imageResult{waiting: &podstatus.Waiting{Reason: reasonErrImagePull, Message: err.Error()}}
	}
	if res != nil {
		return p.finish(pod, c, podKey, image, res)
	}
	return imageResult{waiting: &podstatus.Waiting{Reason: "ContainerCreating"}}
}

// usePresent decides whether the container may run its image found on the node as ref: always without
// records; with them, only when they show the image was pulled with credentials the pod holds, with none,
// or the policy needs no verification (false: pull it with the pod's credentials).
func (p *imagePuller) usePresent(ctx context.Context, pod *corev1.Pod, c *corev1.Container, ref string, creds func() pullCredentials) (imageResult, bool) {
	if p.records == nil {
		p.event(pod, c, corev1.EventTypeNormal, "Pulled", fmt.Sprintf("Container image %q already present on machine", c.Image))
		return imageResult{ref: ref}, true
	}
	must, err := p.records.MustPull(ctx, c.Image, ref, func() ([]imagepull.Secret, error) { return creds().secrets, nil })
	if err != nil {
		return imageResult{waiting: &podstatus.Waiting{Reason: reasonErrImagePull, Message: err.Error()}}, true
	}
	if must {
		return imageResult{}, false
	}
	p.event(pod, c, corev1.EventTypeNormal, "Pulled", fmt.Sprintf("Container image %q already present on machine and can be accessed by the pod", c.Image))
	return imageResult{ref: ref}, true
}

// collect takes a finished pull's result for this pod and image, if there is one.
func (p *imagePuller) collect(podKey, image string) (*pull, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	res, ok := p.results[podKey+"|"+image]
	if ok {
		delete(p.results, podKey+"|"+image)
	}
	return res, ok
}

// finish turns a finished pull into the container's image result, recording the kubelet's events.
func (p *imagePuller) finish(pod *corev1.Pod, c *corev1.Container, podKey, image string, res *pull) imageResult {
	bkey := podKey + "/" + image
	if res.err == nil {
		p.backoff.Reset(bkey)
		p.event(pod, c, corev1.EventTypeNormal, "Pulled", fmt.Sprintf(
			"Successfully pulled image %q in %s (%s including waiting). Image size: %d bytes.",
			c.Image, res.elapsed.Round(time.Millisecond), res.elapsed.Round(time.Millisecond), res.size))
		return imageResult{ref: res.ref}
	}
	p.backoff.Next(bkey, p.clock.Now())
	msg := fmt.Sprintf("Failed to pull image %q: %v", c.Image, res.err)
	p.event(pod, c, corev1.EventTypeWarning, "Failed", msg)
	p.event(pod, c, corev1.EventTypeWarning, "Failed", "Error: "+reasonErrImagePull)
	return imageResult{waiting: &podstatus.Waiting{Reason: reasonErrImagePull, Message: msg}, retryIn: p.backoff.Delay(bkey)}
}

// start begins (or joins) a pull of image on behalf of podKey. With records, pulls with different
// credentials are kept apart and each records its intent first. A pull for the pod that ended since the
// caller looked (collect) is returned instead of starting another: its failure must start the back-off.
func (p *imagePuller) start(pod *corev1.Pod, c *corev1.Container, podKey, image, userImage string,
	creds pullCredentials, sandbox *runtimeapi.PodSandboxConfig) (*pull, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if res, ok := p.results[podKey+"|"+image]; ok {
		delete(p.results, podKey+"|"+image)
		return res, nil
	}
	key := image
	if p.records != nil {
		key = image + "\x00" + userImage + "\x00" + creds.id()
	}
	if _, running := p.inflight[key]; !running {
		if p.records != nil {
			if err := p.records.RecordPullIntent(userImage); err != nil {
				return nil, fmt.Errorf("Failed to record image pull intent for container image %q: %w", userImage, err) //nolint:revive,staticcheck // the kubelet's message
			}
		}
		pl := &pull{done: make(chan struct{})}
		p.inflight[key] = pl
		p.event(pod, c, corev1.EventTypeNormal, "Pulling", fmt.Sprintf("Pulling image %q", userImage))
		go p.run(pl, key, image, userImage, creds, sandbox)
	}
	if p.waiters[key] == nil {
		p.waiters[key] = map[string]bool{}
	}
	p.waiters[key][podKey] = true
	return nil, nil
}

func (p *imagePuller) run(pl *pull, key, image, userImage string, creds pullCredentials, sandbox *runtimeapi.PodSandboxConfig) {
	p.sem <- struct{}{}
	start := p.clock.Now()
	spec := &runtimeapi.ImageSpec{Image: image, UserSpecifiedImage: userImage}
	pl.ref, pl.err = p.images.PullImage(context.Background(), spec, creds.auth, sandbox)
	<-p.sem
	pl.elapsed = p.clock.Since(start)
	if pl.err == nil {
		if img, err := p.images.ImageStatus(context.Background(), spec); err == nil && img != nil {
			pl.size = img.Size
		}
		if h := p.pullDuration.Load(); h != nil {
			h.WithLabelValues(imageSizeBucket(pl.size)).Observe(pl.elapsed.Seconds())
		}
	}
	p.record(userImage, creds, pl)
	p.mu.Lock()
	delete(p.inflight, key)
	waiting := p.waiters[key]
	delete(p.waiters, key)
	for podKey := range waiting {
		p.results[podKey+"|"+image] = pl
	}
	p.mu.Unlock()
	close(pl.done)
	for podKey := range waiting {
		p.notify(podKey)
	}
}

// record ends a pull's intent: the image and the credentials it was pulled with, or the failure.
func (p *imagePuller) record(userImage string, creds pullCredentials, pl *pull) {
	if p.records == nil {
		return
	}
	ctx := context.Background()
	if pl.err != nil {
		p.records.RecordPullFailed(ctx, userImage)
		return
	}
	p.records.RecordPulled(ctx, userImage, pl.ref, creds.pulledWith())
}

// Forget drops what is kept for a pod that is gone.
func (p *imagePuller) Forget(podKey string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k := range p.results {
		if strings.HasPrefix(k, podKey+"|") {
			delete(p.results, k)
		}
	}
}

func (p *imagePuller) event(pod *corev1.Pod, c *corev1.Container, eventType, reason, msg string) {
	if p.recorder != nil {
		p.recorder.Event(containerRef(pod, c), eventType, reason, msg)
	}
}
