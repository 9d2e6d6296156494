package staticpods

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"

	"github.com/nodelet/nodelet/internal/periodic"
)

// DefaultURLTimeout is the kubelet's timeout for one read of staticPodURL.
const DefaultURLTimeout = 10 * time.Second

// errUnreachable marks a failed request: transport error, timeout, or a status other than 200.
var errUnreachable = errors.New("static pod URL unreachable")

// URLSource polls staticPodURL for static pods (one Pod or a PodList). It is a manager.Runnable; its
// pods are the Store source "http".
type URLSource struct {
	URL      string
	Header   http.Header      // staticPodURLHeader, sent on every request
	Period   time.Duration    // httpCheckFrequency (default 20s)
	NodeName string           // default: the Store's
	Clock    clock.WithTicker // default: the real clock
	Store    *Store
	Report   Reporter
	Client   *http.Client // default: a client with a 10s timeout
	MaxBytes int64        // default MaxManifestBytes (10 MiB): a longer body is cut and reported
	// UIDs computes the pods' UIDs (nil: staticpods' own hash); kubeletuid.UIDs gives the kubelet's.
	UIDs UIDFunc

	polled func() // test hook: called after each poll
}

// Start polls the URL at once and then every Period until ctx ends. A failed poll (transport error,
// timeout, a status other than 200, a body over MaxBytes, bad content) is reported once per distinct
// fault and keeps the previous snapshot. An empty 200 response means no pods, as the kubelet. Start
// returns nil when ctx ends.
func (u *URLSource) Start(ctx context.Context) error {
	if u.Store == nil {
		return errors.New("staticpods: URLSource needs a Store")
	}
	p := newURLPoller(u, logr.FromContextOrDiscard(ctx))
	return periodic.Run(ctx, p.clock, nil, p.period, periodic.Measured(ctx, "static-pods-url", p.poll))
}

// NeedLeaderElection is false: every node reads its own static pod URL.
func (u *URLSource) NeedLeaderElection() bool { return false }

// urlPoller is URLSource's state, owned by its Start goroutine.
type urlPoller struct {
	URLSource
	redacted string
	period   time.Duration
	clock    clock.WithTicker
	faults   *faultLog
	log      logr.Logger
	last     []byte // the last 200 body decoded
}

const (
	fetchFaultKey  = "fetch"
	decodeFaultKey = "decode"
)

func newURLPoller(u *URLSource, log logr.Logger) *urlPoller {
	p := &urlPoller{URLSource: *u, period: u.Period, clock: u.Clock, faults: newFaultLog(u.Report), log: log}
	p.redacted = u.URL
	if parsed, err := url.Parse(u.URL); err == nil {
		p.redacted = parsed.Redacted()
	}
	if p.NodeName == "" {
		p.NodeName = u.Store.NodeName()
	}
	if p.period <= 0 {
		p.period = DefaultCheckPeriod
	}
	if p.clock == nil {
		p.clock = clock.RealClock{}
	}
	if p.Client == nil {
		p.Client = &http.Client{Timeout: DefaultURLTimeout}
	}
	if p.MaxBytes <= 0 {
		p.MaxBytes = MaxManifestBytes
	}
	return p
}

func (p *urlPoller) poll(ctx context.Context) {
	if p.polled != nil {
		defer p.polled()
	}
	data, err := p.fetch(ctx)
	if ctx.Err() != nil {
		return // shutting down
	}
	if err != nil {
		reason := ReasonUnreachable
		if errors.Is(err, ErrTooLarge) {
			reason = ReasonTooLarge
		}
		p.faults.fault(fetchFaultKey, reason, err.Error())
		return
	}
	p.faults.clear(fetchFaultKey)
	if p.last != nil && bytes.Equal(data, p.last) {
		return // unchanged since the last decode, whether it worked or was reported
	}
	p.last = data
	p.apply(data)
}

// apply decodes a 200 body into the Store's "http" snapshot; bad content is reported and keeps it.
func (p *urlPoller) apply(data []byte) {
	if len(bytes.TrimSpace(data)) == 0 {
		p.faults.clear(decodeFaultKey)
		p.Store.Update(SourceHTTP, nil)
		p.Store.markSeen(SourceHTTP)
		return
	}
	pods, err := DecodeWith(data, p.NodeName, p.URL, p.UIDs)
	if err != nil {
		p.faults.fault(decodeFaultKey, reasonFor(err), fmt.Sprintf("static pod URL %s: %v", p.redacted, err))
		return
	}
	p.faults.clear(decodeFaultKey)
	p.Store.Update(SourceHTTP, pods)
	p.Store.markSeen(SourceHTTP)
	p.log.V(1).Info("Static pods read from URL", "url", p.redacted, "pods", len(pods))
}

// fetch GETs the URL and returns a 200 body of at most MaxBytes.
func (p *urlPoller) fetch(ctx context.Context) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", errUnreachable, p.redacted, err)
	}
	if p.Header != nil {
		req.Header = p.Header.Clone()
	}
	resp, err := p.Client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errUnreachable, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w: GET %s: %s", errUnreachable, p.redacted, resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, p.MaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%w: reading the body from %s: %w", errUnreachable, p.redacted, err)
	}
	if int64(len(data)) > p.MaxBytes {
		return nil, fmt.Errorf("%w: the response from %s is over %d bytes", ErrTooLarge, p.redacted, p.MaxBytes)
	}
	return data, nil
}
