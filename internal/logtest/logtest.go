// Package logtest collects what a component logs, for tests that assert a message was logged.
package logtest

import (
	"strings"
	"sync"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
)

// Sink collects the messages logged through its Logger.
type Sink struct {
	mu   sync.Mutex
	msgs []string
}

// Logger logs into the sink, at verbosity 4 and below.
func (s *Sink) Logger() logr.Logger {
	return funcr.New(func(_, args string) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.msgs = append(s.msgs, args)
	}, funcr.Options{Verbosity: 4})
}

// Has reports whether a message msg was logged.
func (s *Sink) Has(msg string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.msgs {
		if strings.Contains(m, `"msg"="`+msg+`"`) {
			return true
		}
	}
	return false
}

// Messages are the messages logged so far.
func (s *Sink) Messages() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.msgs...)
}
