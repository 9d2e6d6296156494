package podcgroups

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	godbus "github.com/godbus/dbus/v5"

	"github.com/nodelet/nodelet/podrules"
)

// unitTimeout bounds one systemd job (start or stop of a slice), as runc's systemd driver does.
const unitTimeout = 30 * time.Second

// systemd's D-Bus error names the driver tells apart.
const (
	errUnitExists = "org.freedesktop.systemd1.UnitExists"
	errNoSuchUnit = "org.freedesktop.systemd1.NoSuchUnit"
	errNotLoaded  = "org.freedesktop.systemd1.LoadFailed"
)

// Units is what the systemd driver asks of systemd: transient slice units started with properties, their
// properties changed, and stopped (go-systemd's *dbus.Conn; SystemdUnits reconnects it).
type Units interface {
	StartTransientUnitContext(ctx context.Context, name, mode string, props []sddbus.Property, ch chan<- string) (int, error)
	SetUnitPropertiesContext(ctx context.Context, name string, runtime bool, props ...sddbus.Property) error
	StopUnitContext(ctx context.Context, name, mode string, ch chan<- string) (int, error)
	ResetFailedUnitContext(ctx context.Context, name string) error
}

// SystemdUnits is a connection to systemd's manager, dialled on first use and again after it closes (a
// restarted systemd): the system bus, or systemd's private socket for root, as runc and the kubelet connect.
type SystemdUnits struct {
	// Dial connects (default sddbus.NewWithContext).
	Dial func(ctx context.Context) (*sddbus.Conn, error)

	mu   sync.Mutex
	conn *sddbus.Conn
}

// get returns the connection, dialling a new one if there is none or it was closed. The connection outlives
// the call that dials it: it is dialled without the call's context (a dial context's end closes it).
func (s *SystemdUnits) get() (*sddbus.Conn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil && s.conn.Connected() {
		return s.conn, nil
	}
	if s.conn != nil {
		s.conn.Close()
		s.conn = nil
	}
	dial := s.Dial
	if dial == nil {
		dial = sddbus.NewWithContext
	}
	c, err := dial(context.Background())
	if err != nil {
		return nil, fmt.Errorf("connect to systemd: %w", err)
	}
	s.conn = c
	return c, nil
}

// do runs f on the connection, once more on a new one if the old one was closed under it (a restarted systemd).
func (s *SystemdUnits) do(f func(*sddbus.Conn) error) error {
	c, err := s.get()
	if err != nil {
		return err
	}
	if err = f(c); err != nil && (errors.Is(err, godbus.ErrClosed) || !c.Connected()) {
		if c, err = s.get(); err == nil {
			err = f(c)
		}
	}
	return err
}

// StartTransientUnitContext implements Units.
func (s *SystemdUnits) StartTransientUnitContext(ctx context.Context, name, mode string, props []sddbus.Property, ch chan<- string) (int, error) {
	var id int
	err := s.do(func(c *sddbus.Conn) (err error) {
		id, err = c.StartTransientUnitContext(ctx, name, mode, props, ch)
		return err
	})
	return id, err
}

// SetUnitPropertiesContext implements Units.
func (s *SystemdUnits) SetUnitPropertiesContext(ctx context.Context, name string, runtime bool, props ...sddbus.Property) error {
	return s.do(func(c *sddbus.Conn) error { return c.SetUnitPropertiesContext(ctx, name, runtime, props...) })
}

// StopUnitContext implements Units.
func (s *SystemdUnits) StopUnitContext(ctx context.Context, name, mode string, ch chan<- string) (int, error) {
	var id int
	err := s.do(func(c *sddbus.Conn) (err error) {
		id, err = c.StopUnitContext(ctx, name, mode, ch)
		return err
	})
	return id, err
}

// ResetFailedUnitContext implements Units.
func (s *SystemdUnits) ResetFailedUnitContext(ctx context.Context, name string) error {
	return s.do(func(c *sddbus.Conn) error { return c.ResetFailedUnitContext(ctx, name) })
}

// Close closes the connection, if any.
func (s *SystemdUnits) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil {
		s.conn.Close()
		s.conn = nil
	}
}

func dbusErrorName(err error) string {
	var e godbus.Error
	if errors.As(err, &e) {
		return e.Name
	}
	var pe *godbus.Error
	if errors.As(err, &pe) && pe != nil {
		return pe.Name
	}
	return ""
}

// startSlice makes the slice unit of name with values as its properties, as runc's systemd driver does for
// the kubelet's cgroup manager: a transient slice wanted by its parent slice, without default dependencies,
// with cpu, memory, I/O and tasks accounting. A slice that exists already gets the properties instead.
func (m *Manager) startSlice(ctx context.Context, name podrules.CgroupName, values []cgroupValue) error {
	unit, parent := name.SystemdUnit()
	resources := unitProperties(values)
	ctx, cancel := context.WithTimeout(ctx, unitTimeout)
	defer cancel()
	props := append([]sddbus.Property{
		sddbus.PropDescription("libcontainer container " + unit),
		sddbus.PropWants(parent),
		{Name: "DefaultDependencies", Value: godbus.MakeVariant(false)},
		{Name: "MemoryAccounting", Value: godbus.MakeVariant(true)},
		{Name: "CPUAccounting", Value: godbus.MakeVariant(true)},
		{Name: "TasksAccounting", Value: godbus.MakeVariant(true)},
		ioAccounting(m.Unified),
	}, resources...)
	done := make(chan string, 1)
	_, err := m.Units.StartTransientUnitContext(ctx, unit, "replace", props, done)
	switch {
	case err == nil:
		select {
		case s := <-done:
			if s != "done" {
				_ = m.Units.ResetFailedUnitContext(ctx, unit)
				return fmt.Errorf("create systemd unit %s: job %s", unit, s)
			}
		case <-ctx.Done():
			return fmt.Errorf("create systemd unit %s: %w", unit, ctx.Err())
		}
		return nil
	case dbusErrorName(err) == errUnitExists:
		if len(resources) == 0 {
			return nil
		}
		if err := m.Units.SetUnitPropertiesContext(ctx, unit, true, resources...); err != nil {
			return fmt.Errorf("set properties of systemd unit %s: %w", unit, err)
		}
		return nil
	default:
		return fmt.Errorf("create systemd unit %s: %w", unit, err)
	}
}

// stopSlice stops the slice unit of name once its cgroup holds nothing (stopping a slice would kill what is
// in it: a pod cgroup still in use is left, as rmdir leaves it with the cgroupfs driver). A unit systemd
// does not know is not an error.
func (m *Manager) stopSlice(ctx context.Context, name podrules.CgroupName) error {
	exists, busy, err := m.inUse(name)
	if err != nil || busy {
		if err == nil {
			err = errors.New("device or resource busy")
		}
		return fmt.Errorf("remove pod cgroup %s: %w", name.ToSystemd(), err)
	}
	if !exists {
		return nil // no cgroup: not started (or stopped already), nothing to ask systemd
	}
	unit, _ := name.SystemdUnit()
	ctx, cancel := context.WithTimeout(ctx, unitTimeout)
	defer cancel()
	done := make(chan string, 1)
	if _, err := m.Units.StopUnitContext(ctx, unit, "replace", done); err != nil {
		if n := dbusErrorName(err); n == errNoSuchUnit || n == errNotLoaded {
			return nil
		}
		return fmt.Errorf("stop systemd unit %s: %w", unit, err)
	}
	select {
	case s := <-done:
		if s != "done" {
			return fmt.Errorf("stop systemd unit %s: job %s", unit, s)
		}
	case <-ctx.Done():
		return fmt.Errorf("stop systemd unit %s: %w", unit, ctx.Err())
	}
	_ = m.Units.ResetFailedUnitContext(ctx, unit)
	return nil
}

// inUse reports whether the cgroup of name exists in systemd's own hierarchy (the name=systemd one on cgroup
// v1, the unified one on v2), and whether it has processes or child cgroups there.
func (m *Manager) inUse(name podrules.CgroupName) (exists, busy bool, err error) {
	dir := filepath.Join(m.Root, "systemd", filepath.FromSlash(name.ToSystemd()))
	if m.Unified {
		dir = filepath.Join(m.Root, filepath.FromSlash(name.ToSystemd()))
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return false, false, nil
	}
	if err != nil {
		return false, false, err
	}
	for _, e := range entries {
		if e.IsDir() {
			return true, true, nil
		}
	}
	procs, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if errors.Is(err, os.ErrNotExist) {
		return true, false, nil
	}
	if err != nil {
		return true, false, err
	}
	return true, strings.TrimSpace(string(procs)) != "", nil
}

// ioAccounting is the I/O accounting property of the cgroup version (BlockIOAccounting on v1).
func ioAccounting(unified bool) sddbus.Property {
	if unified {
		return sddbus.Property{Name: "IOAccounting", Value: godbus.MakeVariant(true)}
	}
	return sddbus.Property{Name: "BlockIOAccounting", Value: godbus.MakeVariant(true)}
}

// unitProperties are the systemd unit properties of the control file values, as runc's systemd driver sets
// them alongside the files (systemd would otherwise write its own values back): CPUShares or CPUWeight,
// CPUQuotaPerSecUSec (rounded up to 10 ms, as runc does), MemoryLimit or MemoryMax, TasksMax.
func unitProperties(values []cgroupValue) []sddbus.Property {
	var props []sddbus.Property
	add := func(name string, v uint64) {
		props = append(props, sddbus.Property{Name: name, Value: godbus.MakeVariant(v)})
	}
	period := uint64(podrules.QuotaPeriod)
	for _, v := range values {
		switch v.file {
		case "cpu.shares":
			add("CPUShares", parseLimit(v.value))
		case "cpu.weight":
			add("CPUWeight", parseLimit(v.value))
		case "cpu.cfs_period_us":
			period = parseLimit(v.value)
		case "cpu.cfs_quota_us":
			add("CPUQuotaPerSecUSec", quotaPerSecond(v.value, period))
		case "cpu.max":
			quota, p, _ := strings.Cut(v.value, " ")
			if p != "" {
				period = parseLimit(p)
			}
			add("CPUQuotaPerSecUSec", quotaPerSecond(quota, period))
		case "memory.limit_in_bytes":
			add("MemoryLimit", parseLimit(v.value))
		case "memory.max":
			add("MemoryMax", parseLimit(v.value))
		case pidsMax:
			add("TasksMax", parseLimit(v.value))
		}
	}
	return props
}

// parseLimit reads a control file value: a number, or "max"/-1 (no limit, systemd's infinity).
func parseLimit(s string) uint64 {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n < 0 {
		return math.MaxUint64
	}
	return uint64(n)
}

// quotaPerSecond is a CFS quota over period as systemd's CPUQuotaPerSecUSec: µs of cpu time per second,
// rounded up to whole 10 ms; no quota is infinity.
func quotaPerSecond(quota string, period uint64) uint64 {
	q := parseLimit(quota)
	if q == math.MaxUint64 || period == 0 {
		return math.MaxUint64
	}
	perSec := q * 1_000_000 / period
	if perSec%10_000 != 0 {
		perSec = (perSec/10_000 + 1) * 10_000
	}
	return perSec
}
