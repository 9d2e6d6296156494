package main

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/onsi/ginkgo/v2/types"
)

// groupCount is what a run did with the specs of one group.
type groupCount struct {
	passed, failed, skipped int
	runTime                 time.Duration
}

// groupTable counts specs by group name.
type groupTable map[string]*groupCount

var (
	driverTag = regexp.MustCompile(`\[Driver: [^\]]+\]`)
	// otherTag is a bracketed tag that is not the leading [sig-...] one.
	otherTag = regexp.MustCompile(`\s*\[[^\]]+\]`)
)

// groupOf names a spec's group: its top container's text without its tags (but the [sig-...] one it starts with),
// then the [Driver: ...] tag of the storage test suites, which run the same specs once per driver.
func groupOf(sp types.SpecReport) string {
	top := sp.LeafNodeText
	if len(sp.ContainerHierarchyTexts) > 0 {
		top = sp.ContainerHierarchyTexts[0]
	}
	sig := ""
	if strings.HasPrefix(top, "[sig-") {
		if i := strings.IndexByte(top, ']'); i > 0 {
			sig, top = top[:i+1], top[i+1:]
		}
	}
	name := strings.TrimSpace(otherTag.ReplaceAllString(top, ""))
	if d := driverTag.FindString(sp.FullText()); d != "" {
		name += " " + d
	}
	return strings.TrimSpace(sig + " " + name)
}

func (t groupTable) add(sp types.SpecReport, count func(*groupCount)) {
	name := groupOf(sp)
	g := t[name]
	if g == nil {
		g = &groupCount{}
		t[name] = g
	}
	count(g)
	g.runTime += sp.RunTime
}

// String is the table: one line per group, by name, then the totals.
func (t groupTable) String() string {
	names := make([]string, 0, len(t))
	for n := range t {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	var total groupCount
	fmt.Fprintf(&b, "%6s %6s %7s %9s  %s\n", "passed", "failed", "skipped", "spec-time", "group")
	for _, n := range names {
		g := t[n]
		writeGroup(&b, g, n)
		total.passed += g.passed
		total.failed += g.failed
		total.skipped += g.skipped
		total.runTime += g.runTime
	}
	writeGroup(&b, &total, "total")
	return b.String()
}

func writeGroup(b *strings.Builder, g *groupCount, name string) {
	fmt.Fprintf(b, "%6d %6d %7d %9s  %s\n", g.passed, g.failed, g.skipped, g.runTime.Round(time.Second), name)
}
