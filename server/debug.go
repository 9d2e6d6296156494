package server

import (
	"net/http"
	"net/http/pprof"
	"runtime"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apiserver/pkg/util/compatibility"
	basecompatibility "k8s.io/component-base/compatibility"
	compbasemetrics "k8s.io/component-base/metrics"
	"k8s.io/utils/clock"
)

// componentName is the component /flagz and /statusz name, the kubelet's.
const componentName = "kubelet"

const (
	pprofPath   = "/debug/pprof/"
	flagzPath   = "/flagz"
	statuszPath = "/statusz"
)

// FlagReader gives the command line /flagz serves: each flag's name and value.
type FlagReader interface {
	GetFlagz() map[string]string
}

// FlagzFunc adapts a function to FlagReader.
type FlagzFunc func() map[string]string

// GetFlagz implements FlagReader.
func (f FlagzFunc) GetFlagz() map[string]string { return f() }

// profilingRoutes are the kubelet's /debug/pprof/ (enableProfilingHandler): the index, the named profiles
// (heap, goroutine, allocs, block, mutex, threadcreate), profile, symbol, trace and cmdline, GET only.
// With profiling off the path answers 405 "profiling endpoint is disabled.", as the kubelet.
func (s *Server) profilingRoutes(mux *http.ServeMux) {
	if s.opts.DisableProfilingHandler {
		mux.Handle(pprofPath, refuse("profiling endpoint is disabled."))
		return
	}
	mux.Handle(pprofPath, getOnly(http.HandlerFunc(servePprof)))
}

// servePprof serves one pprof path as the kubelet's switch does; pprof.Index serves the index and, by
// name, every runtime/pprof profile.
func servePprof(w http.ResponseWriter, r *http.Request) {
	switch strings.TrimPrefix(r.URL.Path, pprofPath) {
	case "profile":
		pprof.Profile(w, r)
	case "symbol":
		pprof.Symbol(w, r)
	case "cmdline":
		pprof.Cmdline(w, r)
	case "trace":
		pprof.Trace(w, r)
	default:
		pprof.Index(w, r)
	}
}

// getOnly answers any method but GET with the kubelet's 405 "Method Not Allowed" (Allow: GET).
func getOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			w.Header().Set("Allow", http.MethodGet)
			w.WriteHeader(http.StatusMethodNotAllowed)
			_, _ = w.Write([]byte("Method Not Allowed"))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// refuse answers every request with 405 and message, the kubelet's answer on a disabled endpoint.
func refuse(message string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, message, http.StatusMethodNotAllowed)
	})
}

// statuszPaths are the paths /statusz lists, the kubelet's: the first segment of each path its server
// registers as a plain handler (/healthz, /metrics..., /configz, /debug/...; /flagz when served).
var statuszPaths = []string{"/configz", "/debug", "/healthz", "/metrics"}

// zpagesRoutes are the kubelet's /flagz and /statusz (gates ComponentFlagz and ComponentStatusz, beta and
// on by default since v1.36): text/plain by default, the Flagz and Statusz kinds as JSON, YAML or CBOR when
// asked for (zpages.go).
func (s *Server) zpagesRoutes(mux *http.ServeMux) {
	codecs := newZpageCodecs()
	paths := statuszPaths
	if s.opts.Flagz != nil {
		mux.Handle(flagzPath, newFlagz(componentName, s.opts.Flagz, codecs))
		paths = append(paths[:len(paths):len(paths)], flagzPath)
	}
	if !s.opts.DisableStatusz {
		v := effectiveVersion(s.opts.KubeletVersion)
		info := statuszInfo{start: processStart(s.opts.Clock), now: s.opts.Clock.Now, goVersion: runtime.Version(),
			binaryVersion: v.BinaryVersion().String(), paths: paths}
		if e := v.EmulationVersion(); e != nil {
			info.emulation = e.String()
		}
		mux.Handle(statuszPath, newStatusz(componentName, info, codecs))
	}
}

// processStart is the process's start time as component-base reads it, or now when it cannot.
func processStart(clk clock.PassiveClock) time.Time {
	seconds, err := compbasemetrics.GetProcessStart()
	if err != nil {
		return clk.Now()
	}
	return time.Unix(int64(seconds), 0)
}

// effectiveVersion is the version /statusz reports: v, or the build's (the kubelet's) when v does not parse.
func effectiveVersion(v string) basecompatibility.EffectiveVersion {
	binary, err := version.Parse(v)
	if err != nil {
		return compatibility.DefaultBuildEffectiveVersion()
	}
	return basecompatibility.NewEffectiveVersion(binary, false, version.MajorMinor(0, 0), version.MajorMinor(0, 0))
}
