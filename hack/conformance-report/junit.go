package main

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/onsi/ginkgo/v2/reporters"
	"github.com/onsi/ginkgo/v2/types"
)

// readJUnit reads the JUnit report the e2e framework writes into its report dir (junit_01.xml, what the
// conformance image leaves and hydrophone fetches) as one suite report. Its test case names are "[It] " (or
// another node type) and the spec's full text, its states ginkgo's.
func readJUnit(path string) ([]types.Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var suites reporters.JUnitTestSuites
	if err := xml.Unmarshal(b, &suites); err != nil {
		return nil, fmt.Errorf("decode %s: %w", path, err)
	}
	var r types.Report
	for _, s := range suites.TestSuites {
		for _, tc := range s.TestCases {
			sp, err := specOfTestCase(tc)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			r.SpecReports = append(r.SpecReports, sp)
		}
	}
	if len(r.SpecReports) == 0 {
		return nil, fmt.Errorf("%s holds no test case", path)
	}
	return []types.Report{r}, nil
}

// specOfTestCase is what a JUnit test case says of its spec: node type, full text, state, and the message of a
// failure or of a skip at run time.
func specOfTestCase(tc reporters.JUnitTestCase) (types.SpecReport, error) {
	var sp types.SpecReport
	nodeType, text, ok := strings.Cut(strings.TrimPrefix(tc.Name, "["), "]")
	if !ok || !strings.HasPrefix(tc.Name, "[") {
		return sp, fmt.Errorf("test case %q: no [node type] in front", tc.Name)
	}
	text = strings.TrimSpace(text)
	if err := json.Unmarshal([]byte(strconv.Quote(nodeType)), &sp.LeafNodeType); err != nil {
		return sp, fmt.Errorf("test case %q: node type: %w", tc.Name, err)
	}
	if err := json.Unmarshal([]byte(strconv.Quote(tc.Status)), &sp.State); err != nil {
		return sp, fmt.Errorf("test case %q: status: %w", tc.Name, err)
	}
	sp.LeafNodeText = text
	switch {
	case tc.Failure != nil:
		sp.Failure.Message = tc.Failure.Description
	case tc.Error != nil:
		sp.Failure.Message = tc.Error.Message
	case tc.Skipped != nil:
		sp.Failure.Message = strings.TrimPrefix(strings.TrimPrefix(tc.Skipped.Message, "skipped"), " - ")
	}
	return sp, nil
}
