package nodeshutdown

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/godbus/dbus/v5"
)

const (
	logindService   = "org.freedesktop.login1"
	logindObject    = dbus.ObjectPath("/org/freedesktop/login1")
	logindInterface = "org.freedesktop.login1.Manager"
	systemdService  = "org.freedesktop.systemd1"
	systemdObject   = dbus.ObjectPath("/org/freedesktop/systemd1")
)

// logindBus is logind (and systemd, which reloads it) on the system D-Bus.
type logindBus struct {
	conn    *dbus.Conn
	confDir string
}

// connectLogind connects to the system bus ($DBUS_SYSTEM_BUS_ADDRESS, else /var/run/dbus/system_bus_socket).
func connectLogind(ctx context.Context, confDir string) (logind, error) {
	conn, err := dbus.ConnectSystemBus(dbus.WithContext(ctx))
	if err != nil {
		return nil, err
	}
	return &logindBus{conn: conn, confDir: confDir}, nil
}

func (l *logindBus) Close() error { return l.conn.Close() }

// InhibitDelayMax is logind's InhibitDelayMaxUSec: the longest a delay inhibitor lock holds a shutdown.
func (l *logindBus) InhibitDelayMax() (time.Duration, error) {
	v, err := l.conn.Object(logindService, logindObject).GetProperty(logindInterface + ".InhibitDelayMaxUSec")
	if err != nil {
		return 0, fmt.Errorf("failed reading InhibitDelayMaxUSec property from logind: %w", err)
	}
	us, ok := v.Value().(uint64)
	if !ok {
		return 0, errors.New("InhibitDelayMaxUSec from logind is not a uint64 as expected")
	}
	return time.Duration(us) * time.Microsecond, nil //nolint:gosec // logind's microseconds fit a Duration
}

// Inhibit takes a delay inhibitor lock on shutdown; closing the file releases it.
func (l *logindBus) Inhibit() (*os.File, error) {
	var fd dbus.UnixFD
	err := l.conn.Object(logindService, logindObject).Call(logindInterface+".Inhibit", 0,
		"shutdown", "kubelet", "Kubelet needs time to handle node shutdown", "delay").Store(&fd)
	if err != nil {
		return nil, fmt.Errorf("failed creating systemd inhibitor: %w", err)
	}
	return os.NewFile(uintptr(fd), "inhibitor"), nil
}

// OverrideInhibitDelay raises logind's InhibitDelayMaxSec to d with the kubelet's drop-in file, then has
// logind read its configuration again (SIGHUP through systemd).
func (l *logindBus) OverrideInhibitDelay(d time.Duration) error {
	if err := os.MkdirAll(l.confDir, 0o755); err != nil { //nolint:gosec // logind's configuration directory
		return fmt.Errorf("failed creating %s directory: %w", l.confDir, err)
	}
	path := filepath.Join(l.confDir, "99-kubelet.conf")
	content := fmt.Sprintf("# Kubelet logind override\n[Login]\nInhibitDelayMaxSec=%.0f\n", d.Seconds())
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil { //nolint:gosec // logind reads it
		return fmt.Errorf("failed writing logind shutdown inhibit override file %s: %w", path, err)
	}
	err := l.conn.Object(systemdService, systemdObject).Call("org.freedesktop.systemd1.Manager.KillUnit", 0,
		"systemd-logind.service", "all", int32(syscall.SIGHUP)).Err
	if err != nil {
		return fmt.Errorf("unable to reload logind conf: %w", err)
	}
	return nil
}

// WatchShutdown delivers logind's PrepareForShutdown signals (true: a shutdown begins; false: it was
// cancelled) until the connection closes, when the channel closes.
func (l *logindBus) WatchShutdown() (<-chan bool, error) {
	err := l.conn.AddMatchSignal(dbus.WithMatchInterface(logindInterface), dbus.WithMatchMember("PrepareForShutdown"),
		dbus.WithMatchObjectPath(logindObject))
	if err != nil {
		return nil, fmt.Errorf("failed to monitor shutdown: %w", err)
	}
	signals := make(chan *dbus.Signal, 1)
	l.conn.Signal(signals)
	out := make(chan bool, 1)
	go func() {
		defer close(out)
		for s := range signals {
			if s.Name != logindInterface+".PrepareForShutdown" || len(s.Body) == 0 {
				continue
			}
			if b, ok := s.Body[0].(bool); ok {
				out <- b
			}
		}
	}()
	return out, nil
}
