package podcgroups

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	godbus "github.com/godbus/dbus/v5"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/podrules"
)

// systemdSocketEnv names systemd's private socket for TestSystemdDriverOnARealSystemd (hack/systemd.sh runs a
// systemd for it on a machine that has none: make test-systemd).
const systemdSocketEnv = "NODELET_SYSTEMD_SOCKET"

func dialSystemd(sock string) func(ctx context.Context) (*sddbus.Conn, error) {
	return func(ctx context.Context) (*sddbus.Conn, error) {
		return sddbus.NewConnection(func() (*godbus.Conn, error) {
			c, err := godbus.Dial("unix:path="+sock, godbus.WithContext(ctx))
			if err != nil {
				return nil, err
			}
			if err := c.Auth([]godbus.Auth{godbus.AuthExternal(strconv.Itoa(os.Getuid()))}); err != nil {
				_ = c.Close()
				return nil, err
			}
			return c, nil
		})
	}
}

// The systemd driver against a real systemd and the real cgroup filesystem: the kubelet's kubepods, QoS and
// pod slices are made by systemd (they appear in its own hierarchy) with the kubelet's values in the
// controllers' files, a pod slice in use is left, and a removed one is gone from every hierarchy.
func TestSystemdDriverOnARealSystemd(t *testing.T) {
	sock := os.Getenv(systemdSocketEnv)
	if sock == "" {
		t.Skipf("%s is not set (make test-systemd runs this test against a systemd of its own)", systemdSocketEnv)
	}
	unified, err := IsUnified(DefaultRoot)
	if err != nil {
		t.Fatal(err)
	}
	units := &SystemdUnits{Dial: dialSystemd(sock)}
	defer units.Close()
	top := fmt.Sprintf("nodelettest%d", time.Now().UnixNano()%1_000_000)
	m, err := New(DefaultRoot, "/"+top, 321, true, podrules.CgroupDriverSystemd, units)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), unitTimeout)
		defer cancel()
		done := make(chan string, 1)
		if _, err := units.StopUnitContext(ctx, top+".slice", "replace", done); err == nil {
			<-done
		}
	})
	if err := m.EnsureKubepods(Kubepods{MilliCPU: 1500, MemoryBytes: 768 << 20, Pids: 4000}); err != nil {
		t.Fatal(err)
	}
	if err := m.UpdateQoS(300); err != nil {
		t.Fatal(err)
	}
	quota, mem := int64(50000), int64(128<<20)
	pods := map[string]podrules.PodCgroup{
		"/" + top + "/poda-1":            {CPUShares: 512, CPUQuota: &quota, MemoryLimit: &mem}, // Guaranteed
		"/" + top + "/burstable/podb-2":  {CPUShares: 102},
		"/" + top + "/besteffort/podc-3": {CPUShares: 2},
	}
	for parent, res := range pods {
		if err := m.Ensure(parent, res); err != nil {
			t.Fatalf("Ensure(%s): %v", parent, err)
		}
	}
	guaranteed := top + ".slice/" + top + "-poda_1.slice"
	burstable := top + ".slice/" + top + "-burstable.slice/" + top + "-burstable-podb_2.slice"
	besteffort := top + ".slice/" + top + "-besteffort.slice/" + top + "-besteffort-podc_3.slice"
	want := map[string]string{
		"cpu/" + top + ".slice/cpu.shares":                              "1536",
		"memory/" + top + ".slice/memory.limit_in_bytes":                strconv.Itoa(768 << 20),
		"pids/" + top + ".slice/pids.max":                               "4000",
		"cpu/" + top + ".slice/" + top + "-burstable.slice/cpu.shares":  "307",
		"cpu/" + top + ".slice/" + top + "-besteffort.slice/cpu.shares": "2",
		"cpu/" + guaranteed + "/cpu.shares":                             "512",
		"cpu/" + guaranteed + "/cpu.cfs_quota_us":                       "50000",
		"cpu/" + guaranteed + "/cpu.cfs_period_us":                      "100000",
		"memory/" + guaranteed + "/memory.limit_in_bytes":               strconv.Itoa(128 << 20),
		"pids/" + guaranteed + "/pids.max":                              "321",
		"cpu/" + burstable + "/cpu.shares":                              "102",
		"cpu/" + besteffort + "/cpu.shares":                             "2",
		"pids/" + besteffort + "/pids.max":                              "321",
	}
	if unified {
		t.Skip("cgroup v2: the v1 file table below does not apply (the unit test covers v2's values)")
	}
	for file, w := range want {
		if got := strings.TrimSpace(read(t, filepath.Join(DefaultRoot, file))); got != w {
			t.Errorf("%s = %s, want %s", file, got, w)
		}
	}
	// systemd made them: they are in its own hierarchy, which only systemd writes.
	for _, d := range []string{guaranteed, burstable, besteffort} {
		if _, err := os.Stat(filepath.Join(DefaultRoot, "systemd", d)); err != nil {
			t.Errorf("slice %s is not in systemd's hierarchy: %v", d, err)
		}
	}
	if got := len(m.List()); got != 3 {
		t.Errorf("List() has %d pods, want 3", got)
	}
	if n, ok := m.Processes("a-1"); !ok || n != 0 {
		t.Errorf("Processes(a-1) = %d, %v; want 0, true", n, ok)
	}

	// A pod slice with a cgroup below it (as a container's scope) is left; once empty it is stopped.
	scope := filepath.Join(DefaultRoot, "systemd", burstable, "test.scope")
	if err := os.Mkdir(scope, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := m.Remove("b-2"); err == nil {
		t.Error("Remove of a pod slice in use succeeded")
	}
	if err := os.Remove(scope); err != nil {
		t.Fatal(err)
	}
	for _, uid := range []string{"a-1", "b-2", "c-3"} {
		if err := m.Remove(types.UID(uid)); err != nil {
			t.Errorf("Remove(%s): %v", uid, err)
		}
	}
	for _, d := range []string{guaranteed, burstable, besteffort} {
		for _, h := range []string{"systemd", "cpu", "memory", "pids"} {
			if _, err := os.Stat(filepath.Join(DefaultRoot, h, d)); err == nil {
				t.Errorf("%s/%s is still there after Remove", h, d)
			}
		}
	}
}
