package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilcache "k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/user"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/clock"
)

// attributes is what one request asks for: verb on nodes/<subresource> of this node, by user.
type attributes struct {
	User        user.Info
	Verb        string
	Subresource string
	Node        string
}

// authorizer decides whether a request may proceed.
type authorizer interface {
	Authorize(ctx context.Context, a attributes) (allowed bool, err error)
}

// authorizerFunc adapts a function to authorizer.
type authorizerFunc func(ctx context.Context, a attributes) (bool, error)

// Authorize implements authorizer.
func (f authorizerFunc) Authorize(ctx context.Context, a attributes) (bool, error) { return f(ctx, a) }

// alwaysAllow is the AlwaysAllow mode.
var alwaysAllow = authorizerFunc(func(context.Context, attributes) (bool, error) { return true, nil })

// buildAuthz returns the configured authorization mode.
func (s *Server) buildAuthz() (authorizer, error) {
	z := s.opts.Authz
	switch z.Mode {
	case kubeletconfigv1beta1.KubeletAuthorizationModeAlwaysAllow:
		return alwaysAllow, nil
	case kubeletconfigv1beta1.KubeletAuthorizationModeWebhook:
		if s.opts.Kube == nil {
			return nil, errors.New("node server: webhook authorization needs a kubernetes client")
		}
		sar := &sarAuthorizer{client: s.opts.Kube.AuthorizationV1().SubjectAccessReviews(), backoff: &s.backoff}
		return newAuthzCache(sar, s.opts.Clock, z.Webhook.CacheAuthorizedTTL.Duration,
			z.Webhook.CacheUnauthorizedTTL.Duration), nil
	case "":
		return nil, errors.New("node server: no authorization mode specified")
	default:
		return nil, fmt.Errorf("node server: unknown authorization mode %q", z.Mode)
	}
}

// requestAttributes maps a request to what the kubelet authorizes, in the order it tries them: the verb
// from the HTTP method, resource nodes, the node's name, and a subresource from the path. /pods, /healthz
// and /configz ask for their own subresource first and nodes/proxy second (KubeletFineGrainedAuthz, GA).
func requestAttributes(u user.Info, r *http.Request, node string) []attributes {
	verb := apiVerb(r.Method)
	subs := subresources(r.URL.Path)
	attrs := make([]attributes, 0, len(subs))
	for _, sub := range subs {
		attrs = append(attrs, attributes{User: u, Verb: verb, Subresource: sub, Node: node})
	}
	return attrs
}

// apiVerb is the kubelet's method mapping, with HEAD read as get.
func apiVerb(method string) string {
	switch method {
	case http.MethodPost:
		return "create"
	case http.MethodGet, http.MethodHead:
		return "get"
	case http.MethodPut:
		return "update"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		return "delete"
	}
	return ""
}

// pathSubresources: the first prefix that matches wins; anything else is nodes/proxy.
var pathSubresources = []struct {
	path string
	subs []string
}{
	{"/pods", []string{"pods", "proxy"}},
	{"/healthz", []string{"healthz", "proxy"}},
	{"/configz", []string{"configz", "proxy"}},
	{"/runningpods", []string{"pods", "proxy"}},
	{"/stats", []string{"stats"}},
	{"/metrics", []string{"metrics"}},
	{"/logs", []string{"log"}},
	{"/checkpoint", []string{"checkpoint"}},
	{"/statusz", []string{"statusz"}},
	{"/flagz", []string{"configz"}},
}

func subresources(path string) []string {
	for _, p := range pathSubresources {
		if isSubpath(path, p.path) {
			return p.subs
		}
	}
	return []string{"proxy"}
}

// isSubpath tells whether path is prefix itself or below it.
func isSubpath(path, prefix string) bool {
	return path == prefix || strings.HasPrefix(path, prefix+"/")
}

// sarAuthorizer asks the API server with a SubjectAccessReview.
type sarAuthorizer struct {
	client  authorizationv1client.SubjectAccessReviewInterface
	backoff *wait.Backoff
}

// Authorize implements authorizer.
func (z *sarAuthorizer) Authorize(ctx context.Context, a attributes) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	review := &authorizationv1.SubjectAccessReview{Spec: reviewSpec(a)}
	var result *authorizationv1.SubjectAccessReview
	err := retryReview(ctx, *z.backoff, func() error {
		var err error
		result, err = z.client.Create(ctx, review, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return false, fmt.Errorf("subject access review: %w", err)
	}
	return result.Status.Allowed && !result.Status.Denied, nil
}

func reviewSpec(a attributes) authorizationv1.SubjectAccessReviewSpec {
	spec := authorizationv1.SubjectAccessReviewSpec{
		User: a.User.GetName(), UID: a.User.GetUID(), Groups: a.User.GetGroups(),
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb: a.Verb, Version: "v1", Resource: "nodes", Subresource: a.Subresource, Name: a.Node,
		},
	}
	if extra := a.User.GetExtra(); len(extra) > 0 {
		spec.Extra = make(map[string]authorizationv1.ExtraValue, len(extra))
		for k, v := range extra {
			spec.Extra[k] = v
		}
	}
	return spec
}

// authzCache remembers decisions: allowed ones for allowTTL (cacheAuthorizedTTL), denied ones for denyTTL
// (cacheUnauthorizedTTL). Errors are not remembered.
type authzCache struct {
	next              authorizer
	cache             *utilcache.LRUExpireCache
	allowTTL, denyTTL time.Duration
}

func newAuthzCache(next authorizer, clk clock.Clock, allowTTL, denyTTL time.Duration) *authzCache {
	return &authzCache{next: next, cache: utilcache.NewLRUExpireCacheWithClock(cacheSize, clk),
		allowTTL: allowTTL, denyTTL: denyTTL}
}

// Authorize implements authorizer.
func (c *authzCache) Authorize(ctx context.Context, a attributes) (bool, error) {
	key, err := json.Marshal(reviewSpec(a))
	if err != nil {
		return false, err
	}
	if v, ok := c.cache.Get(string(key)); ok {
		return v.(bool), nil
	}
	allowed, err := c.next.Authorize(ctx, a)
	if err != nil {
		return false, err
	}
	ttl := c.denyTTL
	if allowed {
		ttl = c.allowTTL
	}
	if ttl > 0 {
		c.cache.Add(string(key), allowed, ttl)
	}
	return allowed, nil
}
