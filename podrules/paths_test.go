package podrules_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodelet/nodelet/podrules"
	"github.com/nodelet/nodelet/podrules/podrulestest"
)

func TestPathSegmentRefusesHostileValues(t *testing.T) {
	for _, tc := range podrulestest.HostileSegments() {
		t.Run(tc.Name, func(t *testing.T) {
			err := podrules.PathSegment("pod UID", tc.Value)
			if !errors.Is(err, podrules.ErrUnsafePathSegment) {
				t.Fatalf("PathSegment(%q) = %v, want ErrUnsafePathSegment", tc.Value, err)
			}
			if !strings.Contains(err.Error(), "pod UID") || len(err.Error()) > 200 {
				t.Errorf("error %q: want it to name the identifier, and short", err)
			}
		})
	}
}

func TestPathSegmentAcceptsRealIdentifiers(t *testing.T) {
	for _, v := range []string{
		"3f1c2a9e-8d4b-4c1e-9a7f-2b6d8e0c1a55",     // an API UID
		"6b0b5bbd1c8e4f0a9d3e2c1b0a9f8e7d",         // a static pod's hash UID
		"kube-system", "etcd-node-a", "app", "a.b", // namespaces, names, containers
		"...", "a..b", ".hidden", "..a", // dots that are no path element
		strings.Repeat("a", podrules.MaxPathSegment),
		"kube-system_etcd-node-a_6b0b5bbd1c8e4f0a9d3e2c1b0a9f8e7d", // a pod log directory
	} {
		if err := podrules.PathSegment("name", v); err != nil {
			t.Errorf("PathSegment(%q) = %v, want nil", v, err)
		}
	}
}

// FuzzPathSegment: a value PathSegment accepts is exactly one path segment below any root; one it
// refuses is refused with ErrUnsafePathSegment. CI: go test -run=^$ -fuzz=FuzzPathSegment -fuzztime=10s ./podrules/
func FuzzPathSegment(f *testing.F) {
	for _, h := range podrulestest.HostileSegments() {
		f.Add(h.Value)
	}
	for _, v := range []string{"3f1c2a9e-8d4b-4c1e-9a7f-2b6d8e0c1a55", "kube-system", "...", "..a", "a\\b", " "} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v string) {
		err := podrules.PathSegment("value", v)
		if err != nil {
			if !errors.Is(err, podrules.ErrUnsafePathSegment) {
				t.Fatalf("PathSegment(%q) = %v, not ErrUnsafePathSegment", v, err)
			}
			return
		}
		const root = "/var/lib/nodelet/pods"
		p := filepath.Join(root, v)
		if filepath.Dir(p) != root || filepath.Base(p) != v || !filepath.IsLocal(v) || len(v) > podrules.MaxPathSegment {
			t.Fatalf("PathSegment accepted %q, which joins to %q", v, p)
		}
	})
}

func TestInsideDir(t *testing.T) {
	const dir = "/var/log/pods"
	for _, tc := range []struct {
		path string
		want bool
	}{
		{"/var/log/pods/ns_p_uid/app/0.log", true},
		{"/var/log/pods/./ns_p_uid/app/0.log", true},
		{"/var/log/pods/x", true},
		{"/var/log/pods", false},
		{"/var/log/pods/", false},
		{"/var/log/pods/..", false},
		{"/var/log/pods/../pods2/x", false},
		{"/var/log/pods2/x", false},
		{"/etc/passwd", false},
		{"var/log/pods/x", false},
		{"/var/log/pods/a\x00b", false},
	} {
		if got := podrules.InsideDir(dir, tc.path); got != tc.want {
			t.Errorf("InsideDir(%q, %q) = %v, want %v", dir, tc.path, got, tc.want)
		}
	}
}
