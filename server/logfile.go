package server

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// logOptions are PodLogOptions resolved against the request time.
type logOptions struct {
	tail       int64     // lines from the end; < 0: all
	limitBytes int64     // bytes to write at most; < 0: no limit
	since      time.Time // lines logged before are skipped
	timestamps bool      // prefix each line with its RFC3339Nano time
	follow     bool      // keep writing lines until the container ends
	stream     string    // "", All, Stdout or Stderr
}

// timestampFormat is the kubelet's fixed-width RFC3339Nano.
const timestampFormat = "2006-01-02T15:04:05.000000000Z07:00"

// errLimit ends a read when limitBytes are written.
var errLimit = errors.New("log byte limit reached")

// logMessage is one parsed CRI log record: "<RFC3339Nano> <stream> <P|F>[:tags] <content>".
type logMessage struct {
	time    time.Time
	stream  string
	content []byte // with its newline for a full line, without for a partial one
}

// parseCRILine parses one record (with its trailing newline, if any).
func parseCRILine(line []byte) (logMessage, bool) {
	var m logMessage
	ts, rest, ok := bytes.Cut(line, []byte{' '})
	if !ok {
		return m, false
	}
	t, err := time.Parse(time.RFC3339Nano, string(ts))
	if err != nil {
		return m, false
	}
	stream, rest, ok := bytes.Cut(rest, []byte{' '})
	if !ok || (string(stream) != string(runtimeapi.Stdout) && string(stream) != string(runtimeapi.Stderr)) {
		return m, false
	}
	tags, content, ok := bytes.Cut(rest, []byte{' '})
	if !ok {
		tags, content = bytes.TrimSuffix(rest, []byte{'\n'}), []byte{'\n'}
	}
	tag, _, _ := bytes.Cut(tags, []byte(runtimeapi.LogTagDelimiter))
	if runtimeapi.LogTag(tag) == runtimeapi.LogTagPartial {
		content = bytes.TrimSuffix(content, []byte{'\n'})
	}
	return logMessage{time: t, stream: string(stream), content: content}, true
}

// logWriter writes parsed records with the options applied.
type logWriter struct {
	opts    logOptions
	out     io.Writer
	remain  int64
	newLine bool // the next content starts a line (and gets the timestamp)
}

func newLogWriter(opts logOptions, out io.Writer) *logWriter {
	w := &logWriter{opts: opts, out: out, remain: opts.limitBytes, newLine: true}
	if w.remain < 0 {
		w.remain = int64(^uint64(0) >> 1)
	}
	return w
}

// writeLine writes one raw record; errLimit when the byte limit is reached.
func (w *logWriter) writeLine(line []byte) error {
	m, ok := parseCRILine(line)
	if !ok || m.time.Before(w.opts.since) || !w.wants(m.stream) {
		return nil
	}
	out := m.content
	if w.opts.timestamps && w.newLine {
		out = append([]byte(m.time.Format(timestampFormat)+" "), out...)
	}
	w.newLine = len(m.content) == 0 || m.content[len(m.content)-1] == '\n'
	if int64(len(out)) > w.remain {
		out = out[:w.remain]
	}
	n, err := w.out.Write(out)
	w.remain -= int64(n)
	if err != nil {
		return err
	}
	if w.remain <= 0 {
		return errLimit
	}
	return nil
}

func (w *logWriter) wants(stream string) bool {
	switch w.opts.stream {
	case corev1.LogStreamStdout:
		return stream == string(runtimeapi.Stdout)
	case corev1.LogStreamStderr:
		return stream == string(runtimeapi.Stderr)
	}
	return true
}

// openAtTail opens the log file positioned at the start of its last tail lines (all of it if tail < 0).
// A last line without its newline is not counted.
func openAtTail(path string, tail int64) (*os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	start, err := tailOffset(f, tail)
	if err == nil {
		_, err = f.Seek(start, io.SeekStart)
	}
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}

// tailOffset scans the file backwards in blocks for the start of its last n complete lines.
func tailOffset(f io.ReadSeeker, n int64) (int64, error) {
	if n < 0 {
		return 0, nil
	}
	end, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return 0, err
	}
	const block = 4096
	buf := make([]byte, block)
	var newlines int64
	for pos := end; pos > 0; {
		size := min(int64(block), pos)
		pos -= size
		if _, err := f.Seek(pos, io.SeekStart); err != nil {
			return 0, err
		}
		if _, err := io.ReadFull(f, buf[:size]); err != nil {
			return 0, err
		}
		for i := size - 1; i >= 0; i-- {
			if buf[i] != '\n' {
				continue
			}
			newlines++
			if newlines > n {
				return pos + i + 1, nil
			}
		}
	}
	return 0, nil
}

// copyRecords writes the complete records readable from r; a record still being written (no newline yet)
// is kept in partial for the next call. With limitLines >= 0 it stops after that many records.
func copyRecords(r *bufio.Reader, w *logWriter, partial *[]byte, limitLines *int64) error {
	for *limitLines != 0 {
		chunk, err := r.ReadBytes('\n')
		*partial = append(*partial, chunk...)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		line := *partial
		*partial = nil
		if err := w.writeLine(line); err != nil {
			return err
		}
		if *limitLines > 0 {
			*limitLines--
		}
	}
	return nil
}
