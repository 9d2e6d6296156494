package server

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
)

// routes are the kubelet's endpoints. Everything reaching them is already authenticated and authorized.
// With debugging handlers off (enableDebuggingHandlers: false), the kubelet's debugging endpoints answer
// 405 and /configz, /flagz and /statusz are not served, as in the kubelet. There is no /debug/flags/v
// handler otherwise.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	s.authNotRequiredRoutes(mux)
	mux.Handle("GET /timeline/{namespace}/{pod}", withTimeout(http.HandlerFunc(s.timeline), requestTimeout))
	if s.opts.DisableDebuggingHandlers {
		debuggingDisabledRoutes(mux)
	} else {
		s.debuggingRoutes(mux)
		s.nodeLogRoutes(mux)
		s.profilingRoutes(mux)
		s.zpagesRoutes(mux)
	}
	return mux
}

// readOnlyRoutes are the kubelet's read-only port (readOnlyPort): the endpoints the kubelet serves without
// authentication, and its debugging endpoints refused.
func (s *Server) readOnlyRoutes() http.Handler {
	mux := http.NewServeMux()
	s.authNotRequiredRoutes(mux)
	debuggingDisabledRoutes(mux)
	return mux
}

// authNotRequiredRoutes are what the kubelet serves on both ports (its InstallAuthNotRequiredHandlers):
// health, pods, stats and metrics (/metrics, /metrics/cadvisor, /metrics/resource, /metrics/probes).
func (s *Server) authNotRequiredRoutes(mux *http.ServeMux) {
	short := func(h http.HandlerFunc) http.Handler { return withTimeout(h, requestTimeout) }
	mux.Handle("GET /healthz", short(s.healthz))
	mux.Handle("GET /pods", short(s.pods))
	mux.Handle("GET /metrics", short(promhttp.HandlerFor(s.opts.Metrics,
		promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}).ServeHTTP))
	mux.Handle("GET /metrics/resource", short(s.statsh().resourceMetrics))
	mux.Handle("GET /metrics/cadvisor", short(s.statsh().cadvisorMetrics))
	mux.Handle("GET /metrics/probes", short(promhttp.HandlerFor(s.probeMetrics,
		promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}).ServeHTTP))
	mux.Handle("GET /stats/summary", short(s.statsh().statsSummary))
	mux.Handle("POST /stats/summary", short(s.statsh().statsSummary)) // the kubelet routes both methods
}

// debuggingRoutes are the kubelet's debugging endpoints: logs, exec, attach, port-forward, run, running pods,
// configz.
func (s *Server) debuggingRoutes(mux *http.ServeMux) {
	mux.Handle("GET /configz", withTimeout(http.HandlerFunc(s.configz), requestTimeout))
	mux.HandleFunc("GET /containerLogs/{namespace}/{pod}/{container}", s.logh().containerLogs)
	mux.Handle("GET /runningpods/", withTimeout(http.HandlerFunc(s.runningPods), requestTimeout))
	for _, m := range []string{"GET ", "POST "} {
		mux.HandleFunc(m+"/exec/{namespace}/{pod}/{container}", s.streams().exec)
		mux.HandleFunc(m+"/exec/{namespace}/{pod}/{uid}/{container}", s.streams().exec)
		mux.HandleFunc(m+"/attach/{namespace}/{pod}/{container}", s.streams().attach)
		mux.HandleFunc(m+"/attach/{namespace}/{pod}/{uid}/{container}", s.streams().attach)
		mux.HandleFunc(m+"/portForward/{namespace}/{pod}", s.streams().portForward)
		mux.HandleFunc(m+"/portForward/{namespace}/{pod}/{uid}", s.streams().portForward)
	}
	mux.HandleFunc("POST /run/{namespace}/{pod}/{container}", s.streams().run)
	mux.HandleFunc("POST /run/{namespace}/{pod}/{uid}/{container}", s.streams().run)
}

// debuggingDisabledPaths are the path prefixes the kubelet refuses when debugging handlers are off.
var debuggingDisabledPaths = []string{
	"/run/", "/exec/", "/attach/", "/portForward/", "/containerLogs/", "/runningpods/", "/debug/pprof/", "/logs/",
}

// debuggingDisabledRoutes answer every method under the kubelet's debugging paths with its 405.
func debuggingDisabledRoutes(mux *http.ServeMux) {
	disabled := refuse("Debug endpoints are disabled.")
	for _, p := range debuggingDisabledPaths {
		mux.Handle(p, disabled)
	}
}

// withTimeout bounds a short request's work (its CRI and API calls) by d.
func withTimeout(h http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), d)
		defer cancel()
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write([]byte("ok"))
}

// timeline answers a pod's start timeline as JSON (authorized as nodes/proxy, as every path the kubelet
// does not name); 404 when the node has none for it.
func (s *Server) timeline(w http.ResponseWriter, r *http.Request) {
	if s.opts.Timelines == nil {
		http.NotFound(w, r)
		return
	}
	tl, ok := s.opts.Timelines(r.PathValue("namespace"), r.PathValue("pod"))
	if !ok {
		writeError(w, errorf(http.StatusNotFound, "no start timeline for pod %s/%s on this node", r.PathValue("namespace"), r.PathValue("pod")))
		return
	}
	writeJSON(r.Context(), w, tl)
}

// pods answers the pods bound to this node as a v1 PodList.
func (s *Server) pods(w http.ResponseWriter, r *http.Request) {
	pods, err := s.opts.Pods.List(r.Context())
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	list := &corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}, Items: pods}
	if list.Items == nil {
		list.Items = []corev1.Pod{}
	}
	writeJSON(r.Context(), w, list)
}

// configz answers the running configuration as the kubelet does: {"kubeletconfig": ...}.
func (s *Server) configz(w http.ResponseWriter, r *http.Request) {
	writeJSON(r.Context(), w, map[string]any{"kubeletconfig": s.opts.Configz})
}

func writeJSON(ctx context.Context, w http.ResponseWriter, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if _, err := w.Write(data); err != nil {
		ctrl.LoggerFrom(ctx).V(2).Info("Failed to write response", "err", err.Error())
	}
}
