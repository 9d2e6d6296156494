package agent

import (
	"fmt"
	goruntime "runtime"
	"runtime/debug"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/featuregate"
	"k8s.io/component-base/metrics/legacyregistry"
)

// withLegacyRegistry is the gatherer the node API serves at /metrics: the agent's registry, then the kubelet_*
// and kubernetes_* families of component-base's legacy registry that the agent's registry does not have. The
// kubelet's libraries that nodelet uses register there — the certificate managers'
// kubelet_certificate_manager_* and kubelet_server_expiration_renew_errors — and the kubelet serves them on
// the same endpoint. The rest of that registry (its Go runtime collector, the API server libraries' families
// linked into the binary) is not the node's and is left out.
func withLegacyRegistry(primary prometheus.Gatherer) prometheus.Gatherer {
	return legacyGatherer{primary: primary, legacy: legacyregistry.DefaultGatherer}
}

type legacyGatherer struct {
	primary, legacy prometheus.Gatherer
}

// Gather is prometheus.Gatherer's.
func (g legacyGatherer) Gather() ([]*dto.MetricFamily, error) {
	families, err := g.primary.Gather()
	if err != nil {
		return families, err
	}
	legacy, lerr := g.legacy.Gather()
	have := make(map[string]bool, len(families))
	for _, f := range families {
		have[f.GetName()] = true
	}
	for _, f := range legacy {
		if name := f.GetName(); !have[name] && (strings.HasPrefix(name, "kubelet_") || strings.HasPrefix(name, "kubernetes_")) {
			families = append(families, f)
		}
	}
	if lerr != nil {
		return families, fmt.Errorf("gather the legacy registry: %w", lerr)
	}
	return families, nil
}

var buildInfoOnce, featureInfoOnce sync.Once

// registerFeatureGates records kubernetes_feature_enabled{name,stage} once per process, as the kubelet does:
// every feature gate registered in the default gate (the nodelet binary registers Kubernetes' own, as the
// kubelet does; an embedding program those its libraries register), enabled as the configuration's
// featureGates (gates it does not know left out) and the defaults say.
func registerFeatureGates(gates map[string]bool, log logr.Logger) {
	featureInfoOnce.Do(func() {
		g := utilfeature.DefaultMutableFeatureGate.DeepCopy()
		known := g.GetAll()
		set := map[string]bool{}
		for name, on := range gates {
			if _, ok := known[featuregate.Feature(name)]; ok {
				set[name] = on
			}
		}
		if err := g.SetFromMap(set); err != nil {
			log.Error(err, "Feature gates not recorded in kubernetes_feature_enabled")
			return
		}
		g.AddMetrics()
	})
}

// registerBuildInfo registers kubernetes_build_info once per process in the legacy registry, as Kubernetes
// components do: the version the node reports (kubeletVersion), the commit this binary was built from, the Go
// version and platform.
func registerBuildInfo(version string) {
	buildInfoOnce.Do(func() {
		commit, dirty := "", ""
		if bi, ok := debug.ReadBuildInfo(); ok {
			for _, s := range bi.Settings {
				switch s.Key {
				case "vcs.revision":
					commit = s.Value
				case "vcs.modified":
					dirty = map[string]string{"true": "dirty", "false": "clean"}[s.Value]
				}
			}
		}
		g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kubernetes_build_info",
			Help: "A metric with a constant '1' value labeled by major, minor, git version, git commit, git tree state, " +
				"build date, Go version, and compiler from which Kubernetes was built, and platform on which it is running."},
			[]string{"major", "minor", "git_version", "git_commit", "git_tree_state", "build_date", "go_version", "compiler", "platform"})
		major, minor := versionParts(version)
		g.WithLabelValues(major, minor, version, commit, dirty, "", goruntime.Version(), goruntime.Compiler,
			goruntime.GOOS+"/"+goruntime.GOARCH).Set(1)
		legacyregistry.RawMustRegister(g)
	})
}

// versionParts is the major and minor number of a version "v1.37.1+nodelet" ("1", "37").
func versionParts(v string) (string, string) {
	var major, minor, patch int
	if _, err := fmt.Sscanf(v, "v%d.%d.%d", &major, &minor, &patch); err != nil && major == 0 {
		return "", ""
	}
	return fmt.Sprint(major), fmt.Sprint(minor)
}
