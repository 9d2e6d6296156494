package takeover

import (
	"context"
	"errors"
	"testing"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
)

// The command's own flag errors are usage errors, and help is help. (Its stages are run by make handover: the
// first one changes root, which a test process must not.)
func TestCommandErrors(t *testing.T) {
	ctx := context.Background()
	if _, err := Command(ctx, []string{"--no-such-flag"}, logr.Discard()); !errors.Is(err, ErrUsage) {
		t.Errorf("unknown flag: err %v, want a usage error", err)
	}
	if _, err := Command(ctx, []string{"--help"}, logr.Discard()); !errors.Is(err, pflag.ErrHelp) {
		t.Errorf("--help: err %v, want pflag.ErrHelp", err)
	}
}
