// Command conformance-report summarises a ginkgo JSON report of the upstream e2e suite (or the JUnit report its
// framework writes, junit_01.xml, as the conformance image leaves it): one line
// "N passed, M failed, K skipped" and the failed specs with the first line of their failure, most useful first.
// It exits 1 when a spec failed (or the report holds no spec at all), so `make conformance` fails with it.
// -groups writes, per group of specs (the top container, with its [Driver: ...] for the storage test suites), how
// many passed, failed and were skipped and how long they ran.
//
// With -compare it compares the passed specs of two runs (each a passed-spec list or a JSON report): it prints the
// specs the first run passed and the second did not, and the reverse, and exits 1 when they differ.
//
//	conformance-report [-list-passed FILE] [-groups FILE] REPORT.json
//	conformance-report -compare RUN-A RUN-B
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

func main() {
	passedOut := flag.String("list-passed", "", "write the names of the passed specs to this file, one a line")
	groupsOut := flag.String("groups", "", "write passed, failed and skipped specs and their run time per group to this file")
	compare := flag.Bool("compare", false, "compare the passed specs of two runs (passed-spec lists or JSON reports)")
	flag.Parse()
	if *compare {
		os.Exit(runCompare(os.Stdout, flag.Args()))
	}
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: conformance-report [-list-passed FILE] [-groups FILE] REPORT.json | -compare RUN-A RUN-B")
		os.Exit(2)
	}
	os.Exit(runSummary(flag.Arg(0), *passedOut, *groupsOut))
}

func runSummary(report, passedOut, groupsOut string) int {
	s, err := load(report)
	if err != nil {
		fmt.Fprintf(os.Stderr, "conformance-report: %v\n", err)
		return 2
	}
	s.print(os.Stdout)
	if err := writeTo(passedOut, strings.Join(s.passed, "\n")+"\n"); err != nil {
		fmt.Fprintf(os.Stderr, "conformance-report: %v\n", err)
		return 2
	}
	if err := writeTo(groupsOut, s.groups.String()); err != nil {
		fmt.Fprintf(os.Stderr, "conformance-report: %v\n", err)
		return 2
	}
	if len(s.failed) > 0 || len(s.passed) == 0 {
		return 1
	}
	return 0
}

func runCompare(w io.Writer, args []string) int {
	if len(args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: conformance-report -compare RUN-A RUN-B")
		return 2
	}
	a, err := loadPassed(args[0])
	if err != nil {
		fmt.Fprintf(os.Stderr, "conformance-report: %v\n", err)
		return 2
	}
	b, err := loadPassed(args[1])
	if err != nil {
		fmt.Fprintf(os.Stderr, "conformance-report: %v\n", err)
		return 2
	}
	d := comparePassed(a, b)
	d.print(w, runName(args[0]), runName(args[1]))
	if len(d.onlyA) > 0 || len(d.onlyB) > 0 {
		return 1
	}
	return 0
}

// writeTo writes text to path, when a path is given.
func writeTo(path, text string) error {
	if path == "" {
		return nil
	}
	return os.WriteFile(path, []byte(text), 0o644)
}
