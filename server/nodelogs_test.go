package server

import (
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// logDirEnv is a node API whose log directory holds a file, a service's log file and a link out of it, with
// a journal whose journalctl is a script that prints its arguments (and knows the unit kubelet.service).
func logDirEnv(t *testing.T, query bool) *env {
	t.Helper()
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(dir, "syslog"), []byte("system line\n"), 0o644))
	must(os.MkdirAll(filepath.Join(dir, "containerd"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "containerd", "containerd.log"), []byte("containerd line\n"), 0o644))
	outside := filepath.Join(t.TempDir(), "secret")
	must(os.WriteFile(outside, []byte("not a log\n"), 0o600))
	must(os.Symlink(outside, filepath.Join(dir, "escape")))
	journalctl := filepath.Join(t.TempDir(), "journalctl")
	must(os.WriteFile(journalctl, []byte("#!/bin/sh\nif [ \"$1\" = --field ]; then echo kubelet.service; exit 0; fi\necho journal \"$@\"\n"), 0o755))
	e := newEnv(t, func(o *Options) {
		o.NodeLogDir, o.SystemLogQuery, o.JournalCommand = dir, query, journalctl
	})
	e.addUser("log-token", "reader", "get log")
	e.addUser("metrics-token", "scraper", "get metrics")
	return e
}

// /logs/ serves the node's log directory to callers allowed nodes/log, as the kubelet: its files and listing,
// nothing outside it (a link out of it is refused), GET only.
func TestNodeLogFilesAreServed(t *testing.T) {
	e := logDirEnv(t, false)
	if code, body := e.do("GET", "/logs/syslog", "log-token"); code != http.StatusOK || body != "system line\n" {
		t.Errorf("GET /logs/syslog = %d %q", code, body)
	}
	if code, body := e.do("GET", "/logs/", "log-token"); code != http.StatusOK || !strings.Contains(body, "syslog") || !strings.Contains(body, "containerd/") {
		t.Errorf("GET /logs/ = %d %q, want the directory's listing", code, body)
	}
	if code, body := e.do("GET", "/logs/escape", "log-token"); code == http.StatusOK || strings.Contains(body, "not a log") {
		t.Errorf("GET /logs/escape (a link out of the log directory) = %d %q", code, body)
	}
	if code, body := e.do("GET", "/logs/../../etc/passwd", "log-token"); code == http.StatusOK && strings.Contains(body, "root:") {
		t.Errorf("GET /logs/../../etc/passwd = %d %q", code, body)
	}
	want := "Forbidden (user=scraper, verb=get, resource=nodes, subresource(s)=[log])\n"
	if code, body := e.do("GET", "/logs/syslog", "metrics-token"); code != http.StatusForbidden || body != want {
		t.Errorf("without nodes/log = %d %q, want 403 %q", code, body, want)
	}
	// Without enableSystemLogQuery a query is no query: the path is served.
	if code, body := e.do("GET", "/logs/?query=kubelet", "log-token"); code != http.StatusOK || !strings.Contains(body, "syslog") {
		t.Errorf("GET /logs/?query=kubelet without the log query = %d %q, want the listing", code, body)
	}
}

// With enableSystemLogQuery, /logs/?query= answers a service from the journal (journalctl with the query's
// options), a service that logs to a file by its file, a file by its path; bad queries get the kubelet's
// answers.
func TestNodeLogQuery(t *testing.T) {
	e := logDirEnv(t, true)
	q := func(v string) string { return "/logs/?" + v }
	tests := []struct {
		path     string
		code     int
		contains string
	}{
		{q("query=kubelet"), 200, "journal --utc --no-pager --output=short-precise --unit=kubelet"},
		{q("query=kubelet&tailLines=3&boot=0&pattern=err&sinceTime=2026-01-02T03:04:05Z"), 200,
			"--since=2026-1-2 03:4:5 --pager-end --lines=3 --unit=kubelet --grep=err --boot 0"},
		{q("query=containerd"), 200, "containerd line"},
		{q("query=nosuch"), 200, "log not found for nosuch"},
		{q("query=containerd&tailLines=3"), 200, "options present and query resolved to log files for [containerd]"},
		{q("query=containerd/containerd.log"), 200, "containerd line"},
		{q("query=/syslog"), 406, "path escapes from parent"}, // relative to the log directory only
		{q("query=containerd/nosuch"), 406, "no such file"},
		{q("query=containerd/containerd.log&tailLines=1"), 406, "cannot specify file with options"},
		{q("query=kubelet&query=containerd/containerd.log"), 406, "cannot specify a file and service"},
		{q("query=kube%24x"), 406, "input contains unsupported characters"},
		{q("query=a&query=b&query=c&query=d&query=e"), 406, "must have at most 4 items"},
		{q("query=kubelet&boot=1"), 406, "must be less than 1"},
		{q("query=kubelet&tailLines=100001"), 406, "must be between 0 and 100000"},
		{q("query=kubelet&pattern=" + url.QueryEscape("(")), 406, "pattern"},
		{q("query=kubelet&sinceTime=yesterday"), 400, "invalid time format"},
		{q("query=%20"), 400, "may not be empty"},
		{q("tailLines=3"), 406, "cannot be empty with options"},
		{"/logs/syslog?query=kubelet", 406, "path not allowed in query mode"},
	}
	for _, tt := range tests {
		code, body := e.do("GET", tt.path, "log-token")
		if code != tt.code || !strings.Contains(body, tt.contains) {
			t.Errorf("GET %s = %d %q, want %d containing %q", tt.path, code, body, tt.code, tt.contains)
		}
	}
}

// enableSystemLogHandler: false answers the kubelet's 405 on /logs/.
func TestNodeLogsDisabled(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.DisableSystemLogHandler = true })
	e.addUser("log-token", "reader", "get log", "create log")
	for _, m := range []string{"GET", "POST"} {
		if code, body := e.do(m, "/logs/syslog", "log-token"); code != http.StatusMethodNotAllowed || body != "logs endpoint is disabled.\n" {
			t.Errorf("%s /logs/syslog = %d %q, want 405 logs endpoint is disabled.", m, code, body)
		}
	}
}
