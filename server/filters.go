package server

import (
	"context"
	"fmt"
	"net/http"

	ctrl "sigs.k8s.io/controller-runtime"
)

// withLimits refuses bodies larger than maxBodyBytes with 413, before anything else is done for the request,
// and bounds what a handler can read of a body sent without a length. (A body of known length is left as
// it is: an upgrade request is forwarded as received.)
func (s *Server) withLimits(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > maxBodyBytes {
			w.Header().Set("Connection", "close")
			http.Error(w, "Request Entity Too Large", http.StatusRequestEntityTooLarge)
			return
		}
		if r.ContentLength < 0 {
			r.Body = http.MaxBytesReader(w, r.Body, maxBodyBytes)
		}
		next.ServeHTTP(w, r)
	})
}

// withAuth authenticates (401 when there are no or bad credentials) and authorizes (403 unless one of the
// request's attributes is allowed; 500 when the authorizer fails), as the kubelet's auth filter does.
func (s *Server) withAuth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		log := ctrl.LoggerFrom(r.Context())
		resp, ok, err := s.authn.AuthenticateRequest(r)
		if err != nil || !ok {
			if err != nil {
				log.V(2).Info("Unable to authenticate the request", "err", err.Error(), "path", r.URL.Path)
			}
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		attrs := requestAttributes(resp.User, r, s.opts.NodeName)
		status, msg := s.decide(r.Context(), attrs)
		if status != http.StatusOK {
			log.V(2).Info("Request not authorized", "user", resp.User.GetName(), "verb", attrs[0].Verb,
				"path", r.URL.Path, "status", status)
			http.Error(w, msg, status)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// decide tries the attributes in order; the first allowed one admits the request.
func (s *Server) decide(ctx context.Context, attrs []attributes) (status int, msg string) {
	subs := make([]string, 0, len(attrs))
	for _, a := range attrs {
		subs = append(subs, a.Subresource)
		allowed, err := s.authz.Authorize(ctx, a)
		if err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Authorization error", "user", a.User.GetName(), "verb", a.Verb,
				"subresource", a.Subresource)
			return http.StatusInternalServerError, fmt.Sprintf("Authorization error (user=%s, verb=%s, resource=nodes, subresource=%s)",
				a.User.GetName(), a.Verb, a.Subresource)
		}
		if allowed {
			return http.StatusOK, ""
		}
	}
	return http.StatusForbidden, fmt.Sprintf("Forbidden (user=%s, verb=%s, resource=nodes, subresource(s)=%v)",
		attrs[0].User.GetName(), attrs[0].Verb, subs)
}
