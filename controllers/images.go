package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/distribution/reference"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/nodelet/nodelet/podstatus"
)

// imageService is what the image puller asks of the runtime.
type imageService interface {
	ImageStatus(ctx context.Context, image *runtimeapi.ImageSpec) (*runtimeapi.Image, error)
	PullImage(ctx context.Context, image *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, sandbox *runtimeapi.PodSandboxConfig) (string, error)
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
type imagePuller struct {
	images   imageService
	clock    clock.Clock
	backoff  *backoff
	sem      chan struct{}
	notify   func(podKey string)
	recorder eventRecorder

	mu       sync.Mutex
	inflight map[string]*pull           // by image
	waiters  map[string]map[string]bool // image → pod keys
	results  map[string]*pull           // finished pulls by pod key + image, collected by Ensure
}

func newImagePuller(images imageService, clk clock.Clock, parallel int, rec eventRecorder, notify func(string)) *imagePuller {
	if parallel <= 0 {
		parallel = 1
	}
	return &imagePuller{
		images: images, clock: clk, backoff: newBackoff(clk, backoffInitial, backoffMax),
		sem: make(chan struct{}, parallel), notify: notify, recorder: rec,
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

// Ensure makes the container's image available per its pull policy. It never blocks on a pull.
func (p *imagePuller) Ensure(ctx context.Context, podKey string, pod *corev1.Pod, c *corev1.Container,
	auth *runtimeapi.AuthConfig, sandbox *runtimeapi.PodSandboxConfig) imageResult {
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
			p.event(pod, c, corev1.EventTypeNormal, "Pulled", fmt.Sprintf("Container image %q already present on machine", c.Image))
			return imageResult{ref: present.Id}
		}
		if c.ImagePullPolicy == corev1.PullNever {
			msg := fmt.Sprintf("Container image %q is not present with pull policy of Never", c.Image)
			p.event(pod, c, corev1.EventTypeWarning, reasonErrImageNeverPull, msg)
			return imageResult{waiting: &podstatus.Waiting{Reason: reasonErrImageNeverPull, Message: msg}}
		}
	}
	bkey := podKey + "/" + image
	if wait := p.backoff.InBackOffSince(bkey, p.clock.Now()); wait > 0 {
		msg := fmt.Sprintf("Back-off pulling image %q", c.Image)
		p.event(pod, c, corev1.EventTypeNormal, "BackOff", msg)
		return imageResult{waiting: &podstatus.Waiting{Reason: reasonImagePullBackOff, Message: msg}, retryIn: wait}
	}
	p.start(pod, c, podKey, image, c.Image, auth, sandbox)
	return imageResult{waiting: &podstatus.Waiting{Reason: "ContainerCreating"}}
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

// start begins (or joins) a pull of image on behalf of podKey.
func (p *imagePuller) start(pod *corev1.Pod, c *corev1.Container, podKey, image, userImage string,
	auth *runtimeapi.AuthConfig, sandbox *runtimeapi.PodSandboxConfig) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.waiters[image] == nil {
		p.waiters[image] = map[string]bool{}
	}
	p.waiters[image][podKey] = true
	if _, running := p.inflight[image]; running {
		return
	}
	pl := &pull{done: make(chan struct{})}
	p.inflight[image] = pl
	p.event(pod, c, corev1.EventTypeNormal, "Pulling", fmt.Sprintf("Pulling image %q", userImage))
	go p.run(pl, image, userImage, auth, sandbox)
}

func (p *imagePuller) run(pl *pull, image, userImage string, auth *runtimeapi.AuthConfig, sandbox *runtimeapi.PodSandboxConfig) {
	p.sem <- struct{}{}
	start := p.clock.Now()
	spec := &runtimeapi.ImageSpec{Image: image, UserSpecifiedImage: userImage}
	pl.ref, pl.err = p.images.PullImage(context.Background(), spec, auth, sandbox)
	<-p.sem
	pl.elapsed = p.clock.Since(start)
	if pl.err == nil {
		if img, err := p.images.ImageStatus(context.Background(), spec); err == nil && img != nil {
			pl.size = img.Size
		}
	}
	p.mu.Lock()
	delete(p.inflight, image)
	waiting := p.waiters[image]
	delete(p.waiters, image)
	for key := range waiting {
		p.results[key+"|"+image] = pl
	}
	p.mu.Unlock()
	close(pl.done)
	for key := range waiting {
		p.notify(key)
	}
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
