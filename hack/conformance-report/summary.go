package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/onsi/ginkgo/v2/types"
)

// summary is what a run of the suite did with each spec (It nodes only; suite set-up nodes that failed count
// as failures, since then no spec could run).
type summary struct {
	passed  []string
	failed  []failure
	skipped int
	groups  groupTable
}

type failure struct {
	name, state, message string
}

func load(path string) (*summary, error) {
	reports, err := readReports(path)
	if err != nil {
		return nil, err
	}
	s := &summary{groups: groupTable{}}
	for _, r := range reports {
		for _, sp := range r.SpecReports {
			s.add(sp)
		}
	}
	sort.Strings(s.passed)
	sort.Slice(s.failed, func(i, j int) bool { return s.failed[i].name < s.failed[j].name })
	return s, nil
}

func readReports(path string) ([]types.Report, error) {
	if strings.HasSuffix(path, ".xml") {
		return readJUnit(path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var reports []types.Report
	if err := json.Unmarshal(b, &reports); err != nil {
		return nil, fmt.Errorf("decode %s: %w", path, err)
	}
	if len(reports) == 0 {
		return nil, errors.New("the report holds no suite")
	}
	return reports, nil
}

func (s *summary) add(sp types.SpecReport) {
	name := sp.FullText()
	if sp.LeafNodeType != types.NodeTypeIt {
		if sp.State.Is(types.SpecStateFailureStates) {
			s.failed = append(s.failed, failure{name: sp.LeafNodeType.String() + " " + name, state: sp.State.String(),
				message: firstLine(sp.Failure.Message)})
		}
		return
	}
	switch {
	case sp.State == types.SpecStatePassed:
		s.passed = append(s.passed, name)
		s.groups.add(sp, func(g *groupCount) { g.passed++ })
	case sp.State.Is(types.SpecStateFailureStates):
		s.failed = append(s.failed, failure{name: name, state: sp.State.String(), message: firstLine(sp.Failure.Message)})
		s.groups.add(sp, func(g *groupCount) { g.failed++ })
	case sp.State == types.SpecStateSkipped && sp.Failure.Message != "":
		s.skipped++ // skipped at run time (e2eskipper); specs left out by focus/skip are not counted
		s.groups.add(sp, func(g *groupCount) { g.skipped++ })
	}
}

func firstLine(msg string) string {
	msg = strings.TrimSpace(msg)
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	if len(msg) > 300 {
		msg = msg[:300] + "…"
	}
	return msg
}

func (s *summary) print(w io.Writer) {
	if len(s.failed) > 0 {
		fmt.Fprintln(w, "Failed specs:")
		for _, f := range s.failed {
			fmt.Fprintf(w, "  [%s] %s\n      %s\n", f.state, f.name, f.message)
		}
	}
	fmt.Fprintf(w, "conformance: %d passed, %d failed, %d skipped\n", len(s.passed), len(s.failed), s.skipped)
}
