package podrules

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// ErrUnsafePathSegment is the error of an identifier that cannot be one segment of a host path.
var ErrUnsafePathSegment = errors.New("unsafe as a path segment")

// MaxPathSegment is the longest name of one path segment, in bytes (Linux's NAME_MAX).
const MaxPathSegment = 255

// PathSegment checks that v can be one segment of a path under a root directory: not empty, not "." or
// "..", no "/", "\" or NUL, at most MaxPathSegment bytes. Every pod UID, namespace, name, container and
// volume name that becomes part of a host path goes through it, whatever its source — the API, a static
// pod manifest or URL, the labels of a container found in the runtime, a directory entry — so that a
// hostile value is an error, never a path outside its root. what names the identifier in the error.
func PathSegment(what, v string) error {
	var why string
	switch {
	case v == "":
		why = "empty"
	case v == "." || v == "..":
		why = "a relative path element"
	case strings.ContainsAny(v, "/\\"):
		why = "contains a path separator"
	case strings.ContainsRune(v, 0):
		why = "contains NUL"
	case len(v) > MaxPathSegment:
		why = fmt.Sprintf("longer than %d bytes", MaxPathSegment)
	default:
		return nil
	}
	return fmt.Errorf("%s %q: %w: %s", what, truncated(v), ErrUnsafePathSegment, why)
}

// InsideDir reports whether path names a file strictly below dir, lexically: both are cleaned, and a
// relative path, one with NUL or dir itself is never inside. It is the check for a path that comes from
// outside the agent — a runtime's log path, say — before the agent reads, renames or removes it.
func InsideDir(dir, path string) bool {
	if !filepath.IsAbs(path) || strings.ContainsRune(path, 0) {
		return false
	}
	rel, err := filepath.Rel(filepath.Clean(dir), filepath.Clean(path))
	return err == nil && rel != "." && filepath.IsLocal(rel)
}

// truncated keeps error messages short for very long values.
func truncated(v string) string {
	const keep = 64
	if len(v) <= keep {
		return v
	}
	return v[:keep] + "..."
}
