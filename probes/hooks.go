package probes

import (
	"context"
	"crypto/tls"
	"net/http"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// hookUserAgent is the kubelet's lifecycle hook User-Agent for this Kubernetes minor.
const hookUserAgent = "kube-lifecycle/1.37"

// NewHookRequest builds the GET of an httpGet lifecycle hook as the kubelet does, with the probes' rules: the
// port may be named, host defaults to host (the pod's IP), headers are sent as given (a Host header sets the
// request's host), with the kubelet's lifecycle User-Agent and Accept defaults.
func NewHookRequest(ctx context.Context, a *corev1.HTTPGetAction, c *corev1.Container, host string) (*http.Request, error) {
	return newHTTPGetRequest(ctx, a, c, host, hookUserAgent)
}

// HookClient is the one HTTP client of every lifecycle hook, as the kubelet's: TLS is not verified, no proxy
// is used, and redirects are followed only to the same host (the probes' rule, sameHostRedirects) — a hook
// never becomes a request from the node to wherever a container's answer points.
func HookClient() *http.Client { return hookClient() }

var hookClient = sync.OnceValue(func() *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			TLSClientConfig:     &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the kubelet's hooks do not verify
			Proxy:               nil,
			DisableKeepAlives:   true,
			TLSHandshakeTimeout: 10 * time.Second,
		},
		CheckRedirect: sameHostRedirects,
	}
})
