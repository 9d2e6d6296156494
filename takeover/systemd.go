package takeover

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
)

// ErrNoSystemd is SystemdUnits' answer where systemd does not run.
var ErrNoSystemd = errors.New("systemd does not run")

// SystemdUnits asks the host's systemd about a unit over D-Bus (its private socket as root, else the
// system bus).
type SystemdUnits struct {
	// Root is the host's "/" as this process sees it (default "/"): systemd runs when
	// <Root>/run/systemd/system is a directory, as sd_booted(3) says.
	Root string
	// Dial connects (default sddbus.NewWithContext).
	Dial func(ctx context.Context) (*sddbus.Conn, error)
	// Timeout bounds the connection and the calls (default 10 s).
	Timeout time.Duration
}

// MainPID is unit's MainPID property; loaded is false when systemd has no such unit (LoadState
// not-found); ErrNoSystemd where systemd does not run.
func (s SystemdUnits) MainPID(ctx context.Context, unit string) (pid int, loaded bool, err error) {
	root := s.Root
	if root == "" {
		root = "/"
	}
	if fi, err := os.Stat(filepath.Join(root, "run/systemd/system")); err != nil || !fi.IsDir() {
		return 0, false, ErrNoSystemd
	}
	timeout := s.Timeout
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	dial := s.Dial
	if dial == nil {
		dial = sddbus.NewWithContext
	}
	conn, err := dial(ctx)
	if err != nil {
		return 0, false, fmt.Errorf("connect to systemd: %w", err)
	}
	defer conn.Close()
	return unitMainPID(ctx, conn, unit)
}

// unitMainPID reads unit's LoadState and, when loaded, its MainPID.
func unitMainPID(ctx context.Context, conn *sddbus.Conn, unit string) (int, bool, error) {
	state, err := conn.GetUnitPropertyContext(ctx, unit, "LoadState")
	if err != nil {
		return 0, false, fmt.Errorf("%s LoadState: %w", unit, err)
	}
	if s, _ := state.Value.Value().(string); s == "not-found" {
		return 0, false, nil
	}
	main, err := conn.GetServicePropertyContext(ctx, unit, "MainPID")
	if err != nil {
		return 0, false, fmt.Errorf("%s MainPID: %w", unit, err)
	}
	pid, ok := main.Value.Value().(uint32)
	if !ok {
		return 0, false, fmt.Errorf("%s MainPID is a %T", unit, main.Value.Value())
	}
	return int(pid), true, nil
}
