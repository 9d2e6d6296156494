package probes

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/podrules"
)

// userAgent is the kubelet's probe User-Agent for this Kubernetes minor.
const userAgent = "kube-probe/1.37"

// maxRedirects is how many same-host redirects an HTTP probe follows.
const maxRedirects = 10

// httpProber runs httpGet probes. Its transport is safe for concurrent use and keeps no connections, so
// probes never wait on each other.
type httpProber struct {
	transport *http.Transport
}

// newHTTPProber returns a prober that skips TLS verification, uses no proxy and no keep-alives.
func newHTTPProber() *httpProber {
	return &httpProber{transport: &http.Transport{
		TLSClientConfig:     &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the kubelet's probes do not verify
		Proxy:               nil,
		DisableKeepAlives:   true,
		DisableCompression:  true,
		ForceAttemptHTTP2:   true,
		TLSHandshakeTimeout: 10 * time.Second,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return dial(ctx, network, addr, 0)
		},
	}}
}

// probe sends req: 200–399 is success (a redirect to another host, not followed, a success with a
// warning), anything else or a transport error a failure.
func (p *httpProber) probe(req *http.Request, timeout time.Duration) outcome {
	client := &http.Client{Timeout: timeout, Transport: p.transport, CheckRedirect: sameHostRedirects}
	res, err := client.Do(req)
	if err != nil {
		return failure(err.Error())
	}
	defer func() { _ = res.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(res.Body, maxOutput))
	if err != nil {
		return unknown(fmt.Errorf("read probe response from %s: %w", req.URL.Redacted(), err))
	}
	switch {
	case res.StatusCode >= http.StatusOK && res.StatusCode < http.StatusMultipleChoices:
		return success(string(body))
	case res.StatusCode >= http.StatusMultipleChoices && res.StatusCode < http.StatusBadRequest:
		return warning("Probe terminated redirects, Response body: " + string(body))
	}
	// The body is deliberately not part of a failure's message (kubernetes/kubernetes#99425).
	return failure(fmt.Sprintf("HTTP probe failed with statuscode: %d", res.StatusCode))
}

// sameHostRedirects follows redirects to the same host (up to 10) and stops at one to another host,
// whose response then is the probe's.
func sameHostRedirects(req *http.Request, via []*http.Request) error {
	if req.URL.Hostname() != via[0].URL.Hostname() {
		return http.ErrUseLastResponse
	}
	if len(via) >= maxRedirects {
		return errors.New("stopped after 10 redirects")
	}
	return nil
}

// newHTTPRequest builds the GET request of an httpGet probe: host defaults to the pod IP, the port may
// be named, custom headers are sent as given (a Host header sets the request's host), with the kubelet's
// User-Agent and Accept defaults.
func newHTTPRequest(ctx context.Context, a *corev1.HTTPGetAction, c *corev1.Container, podIP string) (*http.Request, error) {
	return newHTTPGetRequest(ctx, a, c, podIP, userAgent)
}

// newHTTPGetRequest is newHTTPRequest with the given default User-Agent: the kubelet builds the requests of
// probes and of lifecycle hooks alike, each with its own agent name.
func newHTTPGetRequest(ctx context.Context, a *corev1.HTTPGetAction, c *corev1.Container, podIP, agent string) (*http.Request, error) {
	port, err := podrules.ResolvePort(a.Port, c)
	if err != nil {
		return nil, err
	}
	host := a.Host
	if host == "" {
		host = podIP
	}
	if host == "" {
		return nil, errors.New("pod has no IP")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, probeURL(a.Scheme, host, port, a.Path).String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header = probeHeaders(a.HTTPHeaders, agent)
	req.Host = req.Header.Get("Host")
	return req, nil
}

// probeURL joins scheme, host, port and path; a path that does not parse is passed along as it is.
func probeURL(scheme corev1.URIScheme, host string, port int, path string) *url.URL {
	u, err := url.Parse(path)
	if err != nil {
		u = &url.URL{Path: path}
	}
	u.Scheme = strings.ToLower(string(scheme))
	if u.Scheme == "" {
		u.Scheme = "http"
	}
	u.Host = net.JoinHostPort(host, strconv.Itoa(port))
	return u
}

// probeHeaders turns the probe's headers into an http.Header with the kubelet's defaults: User-Agent agent
// (kube-probe/<minor>, kube-lifecycle/<minor>) and Accept */* unless given (an empty Accept removes it).
func probeHeaders(list []corev1.HTTPHeader, agent string) http.Header {
	h := http.Header{}
	for _, e := range list {
		h.Add(e.Name, e.Value)
	}
	if _, ok := h["User-Agent"]; !ok {
		h.Set("User-Agent", agent)
	}
	if _, ok := h["Accept"]; !ok {
		h.Set("Accept", "*/*")
	} else if h.Get("Accept") == "" {
		h.Del("Accept")
	}
	return h
}
