package server

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilcache "k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/group"
	"k8s.io/apiserver/pkg/authentication/request/anonymous"
	"k8s.io/apiserver/pkg/authentication/request/bearertoken"
	"k8s.io/apiserver/pkg/authentication/request/union"
	"k8s.io/apiserver/pkg/authentication/request/websocket"
	"k8s.io/apiserver/pkg/authentication/request/x509"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	authenticationv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
	"k8s.io/utils/clock"
)

// reviewTimeout bounds one TokenReview or SubjectAccessReview call.
const reviewTimeout = 10 * time.Second

// cacheSize bounds the token and authorization caches (the apiserver webhook authorizer's size).
const cacheSize = 8192

// buildAuth builds the authenticator and the authorizer from the kubelet's configuration.
func (s *Server) buildAuth() error {
	authn, err := s.buildAuthn()
	if err != nil {
		return err
	}
	authz, err := s.buildAuthz()
	if err != nil {
		return err
	}
	s.authn, s.authz = authn, authz
	return nil
}

// buildAuthn composes, like the kubelet's delegating authenticator: x509 client certificates, then bearer
// tokens (header or WebSocket protocol) by TokenReview, every user in system:authenticated; then, only if
// enabled, system:anonymous for requests that carry no credentials. Invalid credentials never fall back to
// anonymous.
func (s *Server) buildAuthn() (authenticator.Request, error) {
	a := s.opts.Auth
	var authns []authenticator.Request
	if a.X509.ClientCAFile != "" {
		ca, err := dynamiccertificates.NewDynamicCAContentFromFile("client-ca-bundle", a.X509.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("node server: client CA: %w", err)
		}
		s.clientCA = ca
		authns = append(authns, x509.NewDynamic(ca.VerifyOptions, x509.CommonNameUserConversion))
	}
	if a.Webhook.Enabled != nil && *a.Webhook.Enabled {
		if s.opts.Kube == nil {
			return nil, errors.New("node server: webhook authentication needs a kubernetes client")
		}
		tokens := newTokenCache(&tokenReviewer{client: s.opts.Kube.AuthenticationV1().TokenReviews(), backoff: &s.backoff},
			s.opts.Clock, a.Webhook.CacheTTL.Duration)
		authns = append(authns, bearertoken.New(tokens), websocket.NewProtocolAuthenticator(tokens))
	}
	anonymousEnabled := a.Anonymous.Enabled != nil && *a.Anonymous.Enabled
	switch {
	case len(authns) == 0 && anonymousEnabled:
		return anonymous.NewAuthenticator(nil), nil
	case len(authns) == 0:
		return nil, errors.New("node server: no authentication method configured (x509, webhook or anonymous)")
	}
	authn := group.NewAuthenticatedGroupAdder(union.New(authns...))
	if anonymousEnabled {
		authn = union.NewFailOnError(authn, anonymous.NewAuthenticator(nil))
	}
	return authn, nil
}

// tokenReviewer authenticates a bearer token with a TokenReview.
type tokenReviewer struct {
	client  authenticationv1client.TokenReviewInterface
	backoff *wait.Backoff
}

// AuthenticateToken implements authenticator.Token.
func (t *tokenReviewer) AuthenticateToken(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	review := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}
	var result *authenticationv1.TokenReview
	err := retryReview(ctx, *t.backoff, func() error {
		var err error
		result, err = t.client.Create(ctx, review, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return nil, false, fmt.Errorf("token review: %w", err)
	}
	st := result.Status
	if !st.Authenticated {
		if st.Error != "" {
			return nil, false, errors.New(st.Error)
		}
		return nil, false, nil
	}
	return &authenticator.Response{User: reviewedUser(st.User)}, true, nil
}

func reviewedUser(u authenticationv1.UserInfo) user.Info {
	var extra map[string][]string
	if u.Extra != nil {
		extra = make(map[string][]string, len(u.Extra))
		for k, v := range u.Extra {
			extra[k] = v
		}
	}
	return &user.DefaultInfo{Name: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra}
}

// tokenCache remembers token reviews, positive and negative, for ttl (webhook.cacheTTL); errors are not
// remembered. Tokens are kept only as hashes.
type tokenCache struct {
	next  authenticator.Token
	cache *utilcache.LRUExpireCache
	ttl   time.Duration
}

type tokenResult struct {
	resp *authenticator.Response
	ok   bool
}

func newTokenCache(next authenticator.Token, clk clock.Clock, ttl time.Duration) *tokenCache {
	return &tokenCache{next: next, cache: utilcache.NewLRUExpireCacheWithClock(cacheSize, clk), ttl: ttl}
}

// AuthenticateToken implements authenticator.Token.
func (c *tokenCache) AuthenticateToken(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	sum := sha256.Sum256([]byte(token))
	key := string(sum[:])
	if v, ok := c.cache.Get(key); ok {
		r := v.(tokenResult)
		return r.resp, r.ok, nil
	}
	resp, ok, err := c.next.AuthenticateToken(ctx, token)
	if err != nil {
		return nil, false, err
	}
	if c.ttl > 0 {
		c.cache.Add(key, tokenResult{resp: resp, ok: ok}, c.ttl)
	}
	return resp, ok, nil
}
