package server

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"regexp/syntax"
	"strconv"
	"strings"
	"time"

	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The node log query's limits and the journal's time format, the kubelet's.
const (
	defaultNodeLogDir   = "/var/log/"
	journalDateLayout   = "2006-1-2 15:4:5"
	maxLogTailLines     = 100000
	maxLogServiceLength = 256
	maxLogServices      = 4
	nodeLogQueryTimeout = 30 * time.Second
)

// unsafeServiceName matches what a service name in a node log query may not contain.
var unsafeServiceName = regexp.MustCompile(`[^a-zA-Z\-_.:0-9@]+`)

// nodeLogRoutes are the kubelet's /logs/ (enableSystemLogHandler, on by default): the files under the node's
// log directory (/var/log), and with enableSystemLogQuery the node log query (`kubectl get --raw
// /api/v1/nodes/<node>/proxy/logs/?query=kubelet&tailLines=10`): a service's journal through journalctl, or a
// log file of that name under the log directory. GET only; with the handler off every method answers 405 "logs
// endpoint is disabled.", as the kubelet.
func (s *Server) nodeLogRoutes(mux *http.ServeMux) {
	if s.opts.DisableSystemLogHandler {
		mux.Handle("/logs", refuse("logs endpoint is disabled."))
		mux.Handle("/logs/", refuse("logs endpoint is disabled."))
		return
	}
	h := getOnly(http.StripPrefix("/logs/", http.HandlerFunc(s.nodeLogs)))
	mux.Handle("/logs/", h)
	mux.Handle("/logs", h) // not found, as the kubelet's route without the slash
}

// nodeLogDir is the directory /logs/ serves.
func (s *Server) nodeLogDir() string {
	if s.opts.NodeLogDir != "" {
		return s.opts.NodeLogDir
	}
	return defaultNodeLogDir
}

// nodeLogs serves one /logs/ request (the prefix stripped): a query when the node log query is on and the
// request has one, else the file or directory listing at the path. Files are opened inside the log
// directory: no path or link leads out of it.
func (s *Server) nodeLogs(w http.ResponseWriter, r *http.Request) {
	if s.opts.SystemLogQuery {
		q, errs := parseNodeLogQuery(r.URL.Query())
		if len(errs) > 0 {
			http.Error(w, errs.ToAggregate().Error(), http.StatusBadRequest)
			return
		}
		if q != nil {
			if r.URL.Path != "/" && r.URL.Path != "" {
				http.Error(w, "path not allowed in query mode", http.StatusNotAcceptable)
				return
			}
			if errs := q.validate(s.nodeLogDir()); len(errs) > 0 {
				http.Error(w, errs.ToAggregate().Error(), http.StatusNotAcceptable)
				return
			}
			if len(q.services) > 0 {
				s.serveJournal(w, r, q)
				return
			}
			r.URL.Path = q.files[0]
		}
	}
	root, err := os.OpenRoot(s.nodeLogDir())
	if err != nil {
		http.Error(w, "log directory not available", http.StatusNotFound)
		return
	}
	defer func() { _ = root.Close() }()
	http.FileServerFS(root.FS()).ServeHTTP(w, r)
}

// nodeLogQuery is a parsed node log query: services (journal units, or log files named after them) or one
// file under the log directory, and the journal options.
type nodeLogQuery struct {
	services, files []string
	journalOptions
}

// journalOptions are the query's journal options; a file query takes none.
type journalOptions struct {
	since, until    *time.Time
	tailLines, boot *int
	pattern         string
}

// parseNodeLogQuery reads a node log query from the URL's values; nil without errors when the request has
// none (a plain file request). A query value holding a slash names a file, any other a service.
func parseNodeLogQuery(v url.Values) (*nodeLogQuery, field.ErrorList) {
	var errs field.ErrorList
	q := &nodeLogQuery{}
	queries, asked := v["query"]
	for _, s := range queries {
		switch {
		case strings.ContainsAny(s, `/\`):
			q.files = append(q.files, s)
		case strings.TrimSpace(s) != "":
			q.services = append(q.services, s)
		}
	}
	if asked && len(q.files) == 0 && len(q.services) == 0 {
		errs = append(errs, field.Invalid(field.NewPath("query"), queries, "may not be empty"))
	}
	parseTime := func(name string) *time.Time {
		s := v.Get(name)
		if s == "" {
			return nil
		}
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			errs = append(errs, field.Invalid(field.NewPath(name), s, "invalid time format"))
			return nil
		}
		return &t
	}
	parseInt := func(name string) *int {
		s := v.Get(name)
		if s == "" {
			return nil
		}
		n, err := strconv.Atoi(s)
		if err != nil {
			errs = append(errs, field.Invalid(field.NewPath(name), s, err.Error()))
			return nil
		}
		return &n
	}
	q.since, q.until = parseTime("sinceTime"), parseTime("untilTime")
	q.boot, q.tailLines = parseInt("boot"), parseInt("tailLines")
	q.pattern = v.Get("pattern")
	if len(errs) > 0 {
		return nil, errs
	}
	if len(q.services) == 0 && len(q.files) == 0 && q.journalOptions == (journalOptions{}) {
		return nil, nil
	}
	return q, nil
}

// validate checks the query as the kubelet does: safe service names (at most four), services or one file
// that exists under logDir and takes no options, a time range in order, a boot of 0 or before, tailLines in
// [0, 100000], a pattern that compiles.
func (q *nodeLogQuery) validate(logDir string) field.ErrorList {
	errs := q.validateTargets(logDir)
	if q.since != nil && q.until != nil && q.since.After(*q.until) {
		errs = append(errs, field.Invalid(field.NewPath("untilTime"), q.until, "must be after `sinceTime`"))
	}
	if q.boot != nil && *q.boot > 0 {
		errs = append(errs, field.Invalid(field.NewPath("boot"), *q.boot, "must be less than 1"))
	}
	if q.tailLines != nil {
		if msgs := utilvalidation.IsInRange(*q.tailLines, 0, maxLogTailLines); len(msgs) > 0 {
			errs = append(errs, field.Invalid(field.NewPath("tailLines"), *q.tailLines, msgs[0]))
		}
	}
	if _, err := syntax.Parse(q.pattern, syntax.Perl); err != nil {
		errs = append(errs, field.Invalid(field.NewPath("pattern"), q.pattern, err.Error()))
	}
	return errs
}

// validateTargets checks what the query reads: services with safe names, at most four, or one file under
// logDir without options, not both.
func (q *nodeLogQuery) validateTargets(logDir string) field.ErrorList {
	var errs field.ErrorList
	path := field.NewPath("query")
	for _, s := range q.services {
		switch {
		case len(s) > maxLogServiceLength:
			errs = append(errs, field.Invalid(path, s, fmt.Sprintf("length must be less than %d", maxLogServiceLength)))
		case unsafeServiceName.MatchString(s):
			errs = append(errs, field.Invalid(path, s, "input contains unsupported characters"))
		}
	}
	if len(q.services) > maxLogServices {
		errs = append(errs, field.TooMany(path, len(q.services), maxLogServices))
	}
	switch {
	case len(q.files) == 0 && len(q.services) == 0:
		errs = append(errs, field.Required(path, "cannot be empty with options"))
	case len(q.files) > 0 && len(q.services) > 0:
		errs = append(errs, field.Invalid(path, fmt.Sprintf("%v, %v", q.files, q.services), "cannot specify a file and service"))
	case len(q.files) > 1:
		errs = append(errs, field.Invalid(path, q.files, "cannot specify more than one file"))
	case len(q.files) == 1 && q.journalOptions != (journalOptions{}):
		errs = append(errs, field.Invalid(path, q.files, "cannot specify file with options"))
	case len(q.files) == 1:
		if err := statInRoot(logDir, q.files[0]); err != nil {
			errs = append(errs, field.Invalid(path, q.files, err.Error()))
		}
	}
	return errs
}

func statInRoot(dir, name string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer func() { _ = root.Close() }()
	_, err = root.Stat(name)
	return err
}

// serveJournal answers a services query (gzip when asked for), within 30 s: the services the journal knows
// through journalctl with the query's options, then each other service's log file under the log directory
// (named <service>, <service>.log or <service>/<service>.log), which takes no options.
func (s *Server) serveJournal(w http.ResponseWriter, r *http.Request, q *nodeLogQuery) {
	var out io.Writer = w
	w.Header().Set("Content-Type", "text/plain;charset=UTF-8")
	if r.Header.Get("Accept-Encoding") == "gzip" {
		w.Header().Set("Content-Encoding", "gzip")
		gz, err := gzip.NewWriterLevel(w, gzip.BestSpeed)
		if err != nil {
			_, _ = fmt.Fprintf(w, "\nfailed to get gzip writer: %v\n", err)
			return
		}
		defer func() { _ = gz.Close() }()
		out = gz
	}
	ctx, cancel := context.WithTimeout(r.Context(), nodeLogQueryTimeout)
	defer cancel()
	journalctl := s.opts.JournalCommand
	if journalctl == "" {
		journalctl = "journalctl"
	}
	units := journalUnits(ctx, journalctl)
	var journal, files []string
	for _, svc := range q.services {
		if strings.Contains(units, svc+".service") {
			journal = append(journal, svc)
		} else {
			files = append(files, svc)
		}
	}
	if len(journal) > 0 {
		cmd := exec.CommandContext(ctx, journalctl, q.journalArgs(journal)...)
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Run(); err != nil {
			var exit *exec.ExitError
			if !errors.As(err, &exit) && (q.boot == nil || *q.boot == 0) {
				_, _ = fmt.Fprintf(out, "\nerror: journal output not available\n")
			}
		}
	}
	if len(files) == 0 {
		return
	}
	if q.journalOptions != (journalOptions{}) {
		_, _ = fmt.Fprintf(out, "\noptions present and query resolved to log files for %v\ntry without specifying options\n", files)
		return
	}
	for _, svc := range files {
		copyServiceLogFile(ctx, out, s.nodeLogDir(), svc)
	}
}

// journalUnits lists the units the journal holds entries of ("" when journalctl cannot say).
func journalUnits(ctx context.Context, journalctl string) string {
	b, err := exec.CommandContext(ctx, journalctl, "--field", "_SYSTEMD_UNIT").CombinedOutput()
	if err != nil {
		return ""
	}
	return string(b)
}

// journalArgs are journalctl's arguments for the query's services and options.
func (q *nodeLogQuery) journalArgs(services []string) []string {
	args := []string{"--utc", "--no-pager", "--output=short-precise"}
	if q.since != nil {
		args = append(args, "--since="+q.since.Format(journalDateLayout))
	}
	if q.until != nil {
		args = append(args, "--until="+q.until.Format(journalDateLayout))
	}
	if q.tailLines != nil {
		args = append(args, "--pager-end", fmt.Sprintf("--lines=%d", *q.tailLines))
	}
	for _, svc := range services {
		args = append(args, "--unit="+svc)
	}
	if q.pattern != "" {
		args = append(args, "--grep="+q.pattern)
	}
	if q.boot != nil {
		args = append(args, "--boot", strconv.Itoa(*q.boot))
	}
	return args
}

// copyServiceLogFile copies the log file of a service that does not log to the journal: the first of
// <service>, <service>.log and <service>/<service>.log under dir that is a file.
func copyServiceLogFile(ctx context.Context, w io.Writer, dir, svc string) {
	var err error
	for _, name := range []string{svc, svc + ".log", svc + "/" + svc + ".log"} {
		if err = copyLogFileInRoot(ctx, w, dir, name); !errors.Is(err, os.ErrNotExist) {
			break
		}
	}
	switch {
	case errors.Is(err, os.ErrNotExist):
		_, _ = fmt.Fprintf(w, "\nlog not found for %s\n", svc)
	case err != nil:
		_, _ = fmt.Fprintf(w, "\nerror getting log for %s: %v\n", svc, err)
	}
}

func copyLogFileInRoot(ctx context.Context, w io.Writer, dir, name string) error {
	f, err := os.OpenInRoot(dir, name)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	if fi, err := f.Stat(); err != nil {
		return err
	} else if fi.IsDir() {
		return os.ErrNotExist
	}
	_, err = io.Copy(w, ctxReader{ctx, f})
	return err
}

// ctxReader stops reading once its context is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
