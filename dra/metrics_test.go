package dra

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// The kubelet's DRA metrics: each PrepareResources and UnprepareResources call timed by outcome, each gRPC
// call by driver, method and code, and the prepared claims by driver and in all.
func TestMetrics(t *testing.T) {
	pod := claimPod("a", "shared")
	bd := newBed(t, allocatedClaim("shared", "gpu.example.com", pod))
	reg := prometheus.NewRegistry()
	if err := bd.m.RegisterMetrics(reg); err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	if err := bd.m.PrepareResources(ctx, pod); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP dra_resource_claims_in_use The number of ResourceClaims that are currently in use on the node, by driver name (driver_name label value) and across all drivers (special value <any> for driver_name). Note that the sum of all by-driver counts is not the total number of in-use ResourceClaims because the same ResourceClaim might use devices from different drivers. Instead, use the count for the <any> driver_name.
# TYPE dra_resource_claims_in_use gauge
dra_resource_claims_in_use{driver_name="<any>"} 1
dra_resource_claims_in_use{driver_name="gpu.example.com"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "dra_resource_claims_in_use"); err != nil {
		t.Error(err)
	}
	if err := bd.m.UnprepareResources(ctx, pod.UID); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(bd.m.metrics.operations); n != 2 {
		t.Errorf("%d operation series, want PrepareResources and UnprepareResources", n)
	}
	released := want[:strings.Index(want, "dra_resource_claims_in_use{")] + `dra_resource_claims_in_use{driver_name="<any>"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(released), "dra_resource_claims_in_use"); err != nil {
		t.Error(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var methods []string
	for _, f := range families {
		if f.GetName() != "dra_grpc_operations_duration_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetValue())
			}
			methods = append(methods, strings.Join(labels, " "))
		}
	}
	if got, want := strings.Join(methods, ", "), "gpu.example.com OK /k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources, "+
		"gpu.example.com OK /k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodeUnprepareResources"; got != want {
		t.Errorf("gRPC series %q, want %q", got, want)
	}
}
