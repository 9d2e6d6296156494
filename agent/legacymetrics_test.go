package agent

import (
	"testing"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/featuregate"
)

func TestServedMetricsTakeTheKubeletFamiliesOfTheLegacyRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector())
	registerBuildInfo("v1.37.1+nodelet")
	families, err := withLegacyRegistry(reg).Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, f := range families {
		seen[f.GetName()]++
	}
	if seen["go_goroutines"] != 1 {
		t.Errorf("go_goroutines served %d times, want once (the agent registry's)", seen["go_goroutines"])
	}
	if seen["apiserver_audit_event_total"] != 0 || seen["go_cpu_classes_idle_cpu_seconds_total"] != 0 {
		t.Errorf("families of the legacy registry that are not the node's are served: %v", seen)
	}
	var info bool
	for _, f := range families {
		if f.GetName() != "kubernetes_build_info" {
			continue
		}
		info = true
		labels := map[string]string{}
		for _, l := range f.GetMetric()[0].GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["git_version"] != "v1.37.1+nodelet" || labels["major"] != "1" || labels["minor"] != "37" || labels["go_version"] == "" {
			t.Errorf("kubernetes_build_info labels: %v", labels)
		}
	}
	if !info {
		t.Error("kubernetes_build_info is not served")
	}
}

func TestFeatureGatesAreServed(t *testing.T) {
	// A gate of the default gate, as the nodelet binary's import of Kubernetes' features registers them.
	if err := utilfeature.DefaultMutableFeatureGate.Add(map[featuregate.Feature]featuregate.FeatureSpec{
		"KubeletSeparateDiskGC": {Default: true, PreRelease: featuregate.Beta},
	}); err != nil {
		t.Fatal(err)
	}
	registerFeatureGates(map[string]bool{"KubeletSeparateDiskGC": false, "NoSuchGate": true}, logr.Discard())
	families, err := withLegacyRegistry(prometheus.NewRegistry()).Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "kubernetes_feature_enabled" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "name" && l.GetValue() == "KubeletSeparateDiskGC" {
					if m.GetGauge().GetValue() != 0 {
						t.Errorf("KubeletSeparateDiskGC switched off is served as %v", m.GetGauge().GetValue())
					}
					return
				}
			}
		}
		t.Fatal("KubeletSeparateDiskGC is not in kubernetes_feature_enabled")
	}
	t.Fatal("kubernetes_feature_enabled is not served")
}
