package podcgroups

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	godbus "github.com/godbus/dbus/v5"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/podrules"
)

// fakeUnits is systemd's manager as the driver sees it: units started once (a second start is UnitExists),
// properties recorded, stops of unknown units NoSuchUnit.
type fakeUnits struct {
	mu    sync.Mutex
	props map[string]map[string]any
	calls []string
}

func (f *fakeUnits) StartTransientUnitContext(_ context.Context, name, _ string, props []sddbus.Property, ch chan<- string) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "start "+name)
	if _, ok := f.props[name]; ok {
		return 0, godbus.Error{Name: errUnitExists}
	}
	f.props[name] = map[string]any{}
	for _, p := range props {
		f.props[name][p.Name] = p.Value.Value()
	}
	ch <- "done"
	return 1, nil
}

func (f *fakeUnits) SetUnitPropertiesContext(_ context.Context, name string, _ bool, props ...sddbus.Property) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "set "+name)
	for _, p := range props {
		f.props[name][p.Name] = p.Value.Value()
	}
	return nil
}

func (f *fakeUnits) StopUnitContext(_ context.Context, name, _ string, ch chan<- string) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "stop "+name)
	if _, ok := f.props[name]; !ok {
		return 0, godbus.Error{Name: errNoSuchUnit}
	}
	delete(f.props, name)
	ch <- "done"
	return 1, nil
}

func (f *fakeUnits) ResetFailedUnitContext(context.Context, string) error { return nil }

// With the systemd driver, the kubelet's cgroups are slices: kubepods.slice, kubepods-burstable.slice and a
// pod's kubepods-burstable-pod<uid>.slice, each made through systemd with the values as properties (as runc's
// driver does), and the same values in the control files of the slice's cgroup.
func TestSystemdDriverMakesSlicesWithTheKubeletsValues(t *testing.T) {
	root := t.TempDir()
	mkdirs(t, filepath.Join(root, "cpu"), filepath.Join(root, "memory"), filepath.Join(root, "pids"), filepath.Join(root, "systemd"))
	units := &fakeUnits{props: map[string]map[string]any{}}
	m := &Manager{Root: root, Kubepods: "/kubepods", Resources: true, PidsLimit: 100, Driver: podrules.CgroupDriverSystemd, Units: units}
	fakeCgroupfs(m)
	if err := m.EnsureKubepods(Kubepods{MilliCPU: 2000, MemoryBytes: 1 << 30, Pids: 1000}); err != nil {
		t.Fatal(err)
	}
	if err := m.UpdateQoS(100); err != nil {
		t.Fatal(err)
	}
	quota, mem := int64(25000), int64(64<<20)
	if err := m.Ensure("/kubepods/burstable/pod12-ab", podrules.PodCgroup{CPUShares: 102, CPUQuota: &quota, MemoryLimit: &mem}); err != nil {
		t.Fatal(err)
	}
	pod := "kubepods-burstable-pod12_ab.slice"
	for _, c := range []struct {
		unit, prop string
		want       any
	}{
		{"kubepods.slice", "CPUShares", uint64(2048)},
		{"kubepods.slice", "MemoryLimit", uint64(1 << 30)},
		{"kubepods.slice", "TasksMax", uint64(1000)},
		{"kubepods.slice", "Wants", []string{podrules.SystemdRootSlice}},
		{"kubepods-burstable.slice", "CPUShares", uint64(102)},
		{"kubepods-burstable.slice", "Wants", []string{"kubepods.slice"}},
		{"kubepods-besteffort.slice", "CPUShares", uint64(2)},
		{pod, "CPUShares", uint64(102)},
		{pod, "CPUQuotaPerSecUSec", uint64(250000)},
		{pod, "MemoryLimit", uint64(64 << 20)},
		{pod, "TasksMax", uint64(100)},
		{pod, "Wants", []string{"kubepods-burstable.slice"}},
		{pod, "DefaultDependencies", false},
	} {
		got, ok := units.props[c.unit][c.prop]
		if !ok {
			t.Errorf("%s has no %s", c.unit, c.prop)
			continue
		}
		if gs, ok := got.([]string); ok {
			if !slices.Equal(gs, c.want.([]string)) {
				t.Errorf("%s %s = %v, want %v", c.unit, c.prop, got, c.want)
			}
		} else if got != c.want {
			t.Errorf("%s %s = %v, want %v", c.unit, c.prop, got, c.want)
		}
	}
	dir := "kubepods.slice/kubepods-burstable.slice/" + pod
	for file, want := range map[string]string{
		"cpu/" + dir + "/cpu.shares":               "102",
		"cpu/" + dir + "/cpu.cfs_quota_us":         "25000",
		"memory/" + dir + "/memory.limit_in_bytes": "67108864",
		"pids/" + dir + "/pids.max":                "100",
		"pids/kubepods.slice/pids.max":             "1000",
	} {
		if got := read(t, filepath.Join(root, file)); got != want {
			t.Errorf("%s = %q, want %q", file, got, want)
		}
	}
	// A second UpdateQoS changes the existing slices' properties.
	if err := m.UpdateQoS(500); err != nil {
		t.Fatal(err)
	}
	if got := units.props["kubepods-burstable.slice"]["CPUShares"]; got != uint64(512) {
		t.Errorf("burstable CPUShares after the update = %v, want 512", got)
	}
	if got := m.List(); !slices.Equal(got, []types.UID{"12-ab"}) {
		t.Errorf("List() = %v, want [12-ab]", got)
	}
	if n, ok := m.Processes("12-ab"); ok || n != 0 {
		t.Errorf("Processes without pids.current = %d, %v", n, ok)
	}

	// A pod slice with something in it is left (stopping it would kill what runs there).
	mkdirs(t, filepath.Join(root, "systemd", dir, "cri-containerd-1.scope"))
	if err := m.Remove("12-ab"); err == nil {
		t.Error("Remove of a pod slice in use succeeded")
	}
	if _, ok := units.props[pod]; !ok {
		t.Error("a pod slice in use was stopped")
	}
	if err := os.Remove(filepath.Join(root, "systemd", dir, "cri-containerd-1.scope")); err != nil {
		t.Fatal(err)
	}
	if err := m.Remove("12-ab"); err != nil {
		t.Fatal(err)
	}
	if _, ok := units.props[pod]; ok {
		t.Error("the pod slice was not stopped")
	}
	if got := m.List(); len(got) != 0 {
		t.Errorf("List() after Remove = %v", got)
	}
}

func TestUnitPropertiesOfNoLimitAreInfinity(t *testing.T) {
	props := unitProperties([]cgroupValue{{cpuController, "cpu.cfs_period_us", "100000"}, {cpuController, "cpu.cfs_quota_us", "-1"},
		{cpuController, "cpu.max", "max 100000"}, {memoryController, "memory.max", "max"}, {cpuController, "cpu.max", "1500 100000"}})
	want := []uint64{math.MaxUint64, math.MaxUint64, math.MaxUint64, 20000}
	if len(props) != len(want) {
		t.Fatalf("props = %v", props)
	}
	for i, p := range props {
		if p.Value.Value() != want[i] {
			t.Errorf("%s = %v, want %d", p.Name, p.Value.Value(), want[i])
		}
	}
}

// The connection outlives the call that dials it: a dial context that ends closes a godbus connection, which
// broke every later call (seen on the systemd bed as "use of closed network connection").
func TestSystemdUnitsDialsWithAContextThatDoesNotEnd(t *testing.T) {
	var dialled context.Context
	u := &SystemdUnits{Dial: func(ctx context.Context) (*sddbus.Conn, error) {
		dialled = ctx
		return nil, errors.New("no systemd here")
	}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := u.SetUnitPropertiesContext(ctx, "x.slice", true); err == nil {
		t.Fatal("no error without systemd")
	}
	if dialled == nil || dialled.Done() != nil {
		t.Error("the connection was dialled with a context that can end")
	}
}

// On cgroup v2 the slices get the v2 properties: CPUWeight, CPUQuotaPerSecUSec, MemoryMax, TasksMax.
func TestSystemdDriverV2Properties(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, subtreeControl), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	units := &fakeUnits{props: map[string]map[string]any{}}
	m := &Manager{Root: root, Unified: true, Kubepods: "/kubepods", Resources: true, PidsLimit: 64,
		Driver: podrules.CgroupDriverSystemd, Units: units}
	fakeCgroupfs(m)
	quota, mem := int64(10000), int64(100<<20)
	if err := m.Ensure("/kubepods/pod3", podrules.PodCgroup{CPUShares: 102, CPUQuota: &quota, MemoryLimit: &mem}); err != nil {
		t.Fatal(err)
	}
	pod := units.props["kubepods-pod3.slice"]
	for prop, want := range map[string]uint64{"CPUWeight": 4, "CPUQuotaPerSecUSec": 100000, "MemoryMax": 100 << 20, "TasksMax": 64} {
		if pod[prop] != want {
			t.Errorf("%s = %v, want %d", prop, pod[prop], want)
		}
	}
	if pod["IOAccounting"] != true {
		t.Errorf("IOAccounting = %v, want true", pod["IOAccounting"])
	}
	if got := read(t, filepath.Join(root, "kubepods.slice/kubepods-pod3.slice/cpu.max")); got != "10000 100000" {
		t.Errorf("cpu.max = %q", got)
	}
}
