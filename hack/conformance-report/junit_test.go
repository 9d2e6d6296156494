package main

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/onsi/ginkgo/v2/reporters"
	"github.com/onsi/ginkgo/v2/types"
)

// A JUnit report as the e2e framework writes it (no labels in the names, failure text without a message
// attribute) reads back with the same passed, failed and skipped specs as the JSON report of the same run.
func TestJUnitReportReadsAsTheJSONReport(t *testing.T) {
	dir := t.TempDir()
	setup := types.SpecReport{LeafNodeType: types.NodeTypeSynchronizedBeforeSuite, State: types.SpecStatePassed}
	specs := []types.SpecReport{
		setup,
		spec([]string{"[sig-node] Pods"}, "should be submitted and removed [Conformance]", types.SpecStatePassed, time.Second),
		spec([]string{"[sig-network] DNS"}, "should resolve DNS of partial qualified names [Conformance]", types.SpecStateFailed, time.Second),
		spec([]string{"[sig-apps] Job"}, "should run a job to completion [Conformance]", types.SpecStateTimedout, time.Second),
		skippedAtRunTime([]string{"[sig-storage] In-tree Volumes"}, "should store data"),
		spec([]string{"[sig-node] Lease"}, "lease API should be available [Conformance]", types.SpecStateSkipped, 0),
	}
	path := filepath.Join(dir, "junit_01.xml")
	cfg := reporters.JunitReportConfig{OmitTimelinesForSpecState: types.SpecStatePassed | types.SpecStateSkipped,
		OmitFailureMessageAttr: true, OmitSpecLabels: true}
	if err := reporters.GenerateJUnitReportWithConfig(types.Report{SpecReports: specs}, path, cfg); err != nil {
		t.Fatal(err)
	}
	fromXML, err := load(path)
	if err != nil {
		t.Fatal(err)
	}
	fromJSON, err := load(writeReport(t, dir, specs...))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(fromXML.passed, fromJSON.passed) || len(fromXML.passed) != 1 {
		t.Errorf("passed %q, want %q", fromXML.passed, fromJSON.passed)
	}
	var names []string
	for _, f := range fromXML.failed {
		names = append(names, f.state+" "+f.name)
	}
	want := []string{"failed [sig-network] DNS should resolve DNS of partial qualified names [Conformance]",
		"timedout [sig-apps] Job should run a job to completion [Conformance]"}
	slices.Sort(names)
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Errorf("failed %q, want %q", names, want)
	}
	if fromXML.skipped != 1 {
		t.Errorf("skipped at run time %d, want 1", fromXML.skipped)
	}
	passed, err := loadPassed(path)
	if err != nil || !passed["[sig-node] Pods should be submitted and removed [Conformance]"] {
		t.Errorf("loadPassed: %v, %v", passed, err)
	}
}
