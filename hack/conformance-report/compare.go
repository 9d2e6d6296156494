package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// passedDiff is what one run passed and the other did not, both ways.
type passedDiff struct {
	onlyA, onlyB []string
}

// loadPassed reads a run's passed specs: a ginkgo JSON report (*.json), else a passed-spec list, one a line.
func loadPassed(path string) (map[string]bool, error) {
	if strings.HasSuffix(path, ".json") || strings.HasSuffix(path, ".xml") {
		s, err := load(path)
		if err != nil {
			return nil, err
		}
		return setOf(s.passed), nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var names []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" {
			names = append(names, line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return setOf(names), nil
}

func setOf(names []string) map[string]bool {
	set := make(map[string]bool, len(names))
	for _, n := range names {
		set[n] = true
	}
	return set
}

func comparePassed(a, b map[string]bool) passedDiff {
	return passedDiff{onlyA: missingFrom(a, b), onlyB: missingFrom(b, a)}
}

// missingFrom lists, sorted, the names in have that want lacks.
func missingFrom(have, want map[string]bool) []string {
	var out []string
	for n := range have {
		if !want[n] {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// runName names a run by its file, or by its report folder when the file has the usual name.
func runName(path string) string {
	base := filepath.Base(path)
	if base == "passed.txt" || base == "report.json" {
		return filepath.Base(filepath.Dir(path))
	}
	return base
}

func (d passedDiff) print(w io.Writer, nameA, nameB string) {
	printList(w, fmt.Sprintf("passed by %s and not by %s", nameA, nameB), d.onlyA)
	printList(w, fmt.Sprintf("passed by %s and not by %s", nameB, nameA), d.onlyB)
}

func printList(w io.Writer, title string, names []string) {
	fmt.Fprintf(w, "%s: %d\n", title, len(names))
	for _, n := range names {
		fmt.Fprintf(w, "  %s\n", n)
	}
}
