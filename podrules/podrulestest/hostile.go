// Package podrulestest holds test data for the pod rules: identifiers a hostile manifest, API object or
// runtime label may carry, for the tables of every function that builds a path from one.
package podrulestest

import "strings"

// HostileSegment is an identifier that must never become part of a host path.
type HostileSegment struct {
	Name  string // what the case is about
	Value string
}

// HostileSegments are the identifiers every path builder must refuse: relative path elements, separators,
// traversals, absolute paths, NUL, the empty string and a name longer than a file name may be.
func HostileSegments() []HostileSegment {
	return []HostileSegment{
		{"empty", ""},
		{"dot", "."},
		{"dot-dot", ".."},
		{"slash", "/"},
		{"traversal", "a/../../b"},
		{"up to the root", "../../../../../../../.."},
		{"absolute", "/etc"},
		{"trailing slash", "pod/"},
		{"backslash traversal", `..\..\etc`},
		{"NUL", "a\x00b"},
		{"NUL only", "\x00"},
		{"very long", strings.Repeat("a", 256)},
		{"very long traversal", strings.Repeat("../", 100)},
	}
}
