package csi_test

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	"github.com/onsi/gomega"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodelet/nodelet/volumes/csi"
)

const driverName = "fake.csi.example.com"

// node is a plugin watcher with the CSI handler (no API server) on a fake clock, running until the test
// ends.
type node struct {
	dir      string // the plugin registration directory
	registry *csi.Registry
	clock    *clocktesting.FakeClock
}

func startNode(t *testing.T, root string) *node {
	t.Helper()
	n := &node{dir: filepath.Join(root, csi.RegistrationDir), registry: csi.NewRegistry(), clock: clocktesting.NewFakeClock(time.Now())}
	w := &csi.PluginWatcher{Dir: n.dir, Clock: n.clock,
		Handlers: map[string]csi.Handler{registerapi.CSIPlugin: &csi.RegistrationHandler{Registry: n.registry}}}
	// The watcher's log goes to the test's: shown when a test fails.
	ctx, cancel := context.WithCancel(logr.NewContext(context.Background(), testr.New(t)))
	done := make(chan error, 1)
	go func() { done <- w.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start: %v", err)
		}
	})
	return n
}

// regSocket is where node-driver-registrar puts the registration socket of name.
func (n *node) regSocket(name string) string { return filepath.Join(n.dir, name+"-reg.sock") }

// eventually waits up to 10 s for cond, stepping the fake clock so that retries come due.
func (n *node) eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	gomega.NewWithT(t).Eventually(func() bool {
		n.clock.Step(100 * time.Millisecond)
		return cond()
	}).WithTimeout(10*time.Second).WithPolling(5*time.Millisecond).Should(gomega.BeTrue(), what)
}

func (n *node) registered(name, nodeID string) func() bool {
	return func() bool {
		d, ok := n.registry.Get(name)
		return ok && d.NodeID == nodeID
	}
}

func told(p *fakePlugin, registered bool, msg string) func() bool {
	return func() bool {
		st := p.lastStatus()
		return st != nil && st.PluginRegistered == registered && strings.Contains(st.Error, msg)
	}
}

func TestRegistersACSIDriverFromItsSocket(t *testing.T) {
	root := tempDir(t)
	n := startNode(t, root)
	p := newFakePlugin(t, root, driverName)
	p.maxVols, p.topology = 7, map[string]string{"topology.fake/node": "n1"}
	p.start(t, n.regSocket(driverName))

	n.eventually(t, "the driver is registered", n.registered(driverName, "node-1"))
	n.eventually(t, "the plugin is told it is registered", told(p, true, ""))
	d, _ := n.registry.Get(driverName)
	if d.Endpoint != p.info.Endpoint || d.MaxVolumes != 7 || !maps.Equal(d.Topology, p.topology) || d.HighestVersion != "1.0.0" {
		t.Errorf("registered %+v", d)
	}
	c, err := n.registry.NodeClient(driverName)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.NodeUnpublishVolume(context.Background(), "vol", "/target"); err != nil || p.callCount("NodeUnpublishVolume") != 1 {
		t.Errorf("the registered driver's client did not reach it: %v", err)
	}
}

func TestRegistersSocketsPresentAtStartIncludingSubdirectories(t *testing.T) {
	root := tempDir(t)
	dir := filepath.Join(root, csi.RegistrationDir)
	nested := newFakePlugin(t, root, "nested.csi.example.com")
	nested.start(t, filepath.Join(dir, "sub", "nested.csi.example.com-reg.sock"))
	hidden := newFakePlugin(t, root, "hidden.csi.example.com")
	hidden.start(t, filepath.Join(dir, ".hidden-reg.sock"))
	n := startNode(t, root)

	n.eventually(t, "the nested plugin is registered", n.registered("nested.csi.example.com", "node-1"))
	later := newFakePlugin(t, root, "later.csi.example.com")
	if err := os.MkdirAll(filepath.Join(dir, "later"), 0o750); err != nil {
		t.Fatal(err)
	}
	later.start(t, filepath.Join(dir, "later", "reg.sock"))
	n.eventually(t, "a plugin in a directory made later is registered", n.registered("later.csi.example.com", "node-1"))
	if _, ok := n.registry.Get("hidden.csi.example.com"); ok || hidden.lastStatus() != nil {
		t.Error("a socket whose name starts with a dot was registered")
	}
}

func TestRefusesInvalidCSIPlugins(t *testing.T) {
	for _, tc := range []struct {
		name, driver string
		versions     []string
		want         string
	}{
		{"a 2.x version only", driverName, []string{"2.0.0"}, "None of the versions specified"},
		{"a 0.x version only", driverName, []string{"0.3.0"}, "must be v1.x"},
		{"no version", driverName, nil, "Plugin returned an empty list for supported versions"},
		{"an unparsable version", driverName, []string{"latest"}, "None of the versions specified"},
		{"an invalid driver name", "Bad_Name!", []string{"1.0.0"}, "invalid driver name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := tempDir(t)
			n := startNode(t, root)
			p := newFakePlugin(t, root, tc.driver)
			p.info.SupportedVersions = tc.versions
			p.start(t, n.regSocket("plugin"))
			n.eventually(t, "the plugin is refused", told(p, false, "RegisterPlugin error -- plugin validation failed with err: validation failed for CSI Driver"))
			if st := p.lastStatus(); !strings.Contains(st.Error, tc.want) {
				t.Errorf("refusal %q, want it to say %q", st.Error, tc.want)
			}
			if len(n.registry.Drivers()) != 0 || p.callCount("NodeGetInfo") != 0 {
				t.Error("an invalid plugin was registered or asked NodeGetInfo")
			}
		})
	}
}

func TestRefusesPluginTypesWithoutAHandler(t *testing.T) {
	for _, typ := range []string{registerapi.DevicePlugin, registerapi.DRAPlugin, "Unknown"} {
		t.Run(typ, func(t *testing.T) {
			root := tempDir(t)
			n := startNode(t, root)
			p := newFakePlugin(t, root, "example.com/gpu")
			p.info.Type = typ
			p.start(t, n.regSocket("gpu"))
			n.eventually(t, "the plugin is refused", told(p, false, "RegisterPlugin error -- no handler registered for plugin type: "+typ+" at socket "+n.regSocket("gpu")))
			if len(n.registry.Drivers()) != 0 {
				t.Error("a plugin of a type without handler was registered")
			}
		})
	}
}

func TestRemovedSocketDeregistersTheDriver(t *testing.T) {
	root := tempDir(t)
	n := startNode(t, root)
	p := newFakePlugin(t, root, driverName)
	p.start(t, n.regSocket(driverName))
	n.eventually(t, "the driver is registered", n.registered(driverName, "node-1"))

	p.stop()
	n.eventually(t, "the driver is de-registered", func() bool { _, ok := n.registry.Get(driverName); return !ok })
	if _, err := n.registry.NodeClient(driverName); err == nil || !strings.Contains(err.Error(), "not found in the list of registered CSI drivers") {
		t.Errorf("NodeClient of a de-registered driver: %v", err)
	}
}

func TestSocketMadeAgainReregistersTheDriver(t *testing.T) {
	root := tempDir(t)
	n := startNode(t, root)
	p := newFakePlugin(t, root, driverName)
	p.start(t, n.regSocket(driverName))
	n.eventually(t, "the driver is registered", n.registered(driverName, "node-1"))
	old, _ := n.registry.NodeClient(driverName)

	// The registrar and its driver restart: the same registration socket, a new endpoint and node ID.
	p.stop()
	again := newFakePlugin(t, root, driverName)
	again.info.Endpoint = filepath.Join(root, "plugins", "v2", "csi.sock")
	again.nodeID = "node-2"
	again.start(t, n.regSocket(driverName))
	n.eventually(t, "the new registration replaces the old", n.registered(driverName, "node-2"))
	n.eventually(t, "the restarted plugin is told it is registered", told(again, true, ""))
	if d, _ := n.registry.Get(driverName); d.Endpoint != again.info.Endpoint {
		t.Errorf("endpoint %s, want the new one %s", d.Endpoint, again.info.Endpoint)
	}
	if c, _ := n.registry.NodeClient(driverName); c == old {
		t.Error("the old registration's client (and its cached capabilities) survived")
	}
}

func TestSecondSocketOfADriverReplacesItOnlyWithAHigherVersion(t *testing.T) {
	root := tempDir(t)
	n := startNode(t, root)
	first := newFakePlugin(t, root, driverName)
	first.start(t, n.regSocket("first"))
	n.eventually(t, "the first socket registers the driver", n.registered(driverName, "node-1"))

	same := newFakePlugin(t, root, driverName)
	same.info.Endpoint = filepath.Join(root, "plugins", "same", "csi.sock")
	same.start(t, n.regSocket("same"))
	n.eventually(t, "a second socket with the same version is refused",
		told(same, false, "Another driver with the same name is already registered with a higher supported version"))

	higher := newFakePlugin(t, root, driverName)
	higher.info.Endpoint = filepath.Join(root, "plugins", "higher", "csi.sock")
	higher.info.SupportedVersions = []string{"1.0.0", "1.5.0"}
	higher.nodeID = "node-2"
	higher.start(t, n.regSocket("higher"))
	n.eventually(t, "a higher version replaces the driver", n.registered(driverName, "node-2"))

	first.stop()
	gomega.NewWithT(t).Consistently(n.registered(driverName, "node-2")).WithTimeout(300*time.Millisecond).Should(gomega.BeTrue(),
		"removing the replaced socket de-registered the driver that replaced it")
}

func TestNodeGetInfoFailureRefusesTheDriverThenItRegistersOnRetry(t *testing.T) {
	root := tempDir(t)
	n := startNode(t, root)
	p := newFakePlugin(t, root, driverName)
	p.infoErr = status.Error(codes.Unavailable, "driver not ready")
	p.start(t, n.regSocket(driverName))
	n.eventually(t, "the plugin is refused", told(p, false, "plugin registration failed with err: NodeGetInfo of CSI driver "+driverName))
	if st := p.lastStatus(); !strings.Contains(st.Error, "driver not ready") {
		t.Errorf("refusal %q does not carry the driver's error", st.Error)
	}
	if len(n.registry.Drivers()) != 0 {
		t.Fatal("a driver whose NodeGetInfo failed was registered")
	}

	p.mu.Lock()
	p.infoErr = nil
	p.mu.Unlock()
	n.eventually(t, "the retry registers the driver", n.registered(driverName, "node-1"))
	n.eventually(t, "the plugin is told it is registered", told(p, true, ""))
}

func TestEmptyNodeIDRefusesTheDriver(t *testing.T) {
	root := tempDir(t)
	n := startNode(t, root)
	p := newFakePlugin(t, root, driverName)
	p.nodeID = ""
	p.start(t, n.regSocket(driverName))
	n.eventually(t, "the plugin is refused", told(p, false, "driverNodeID must not be empty"))
	if len(n.registry.Drivers()) != 0 {
		t.Error("a driver without node ID was registered")
	}
}

func TestRemovedDirectoryDeregistersTheDriversUnderIt(t *testing.T) {
	root := tempDir(t)
	n := startNode(t, root)
	sub := filepath.Join(n.dir, "sub")
	if err := os.MkdirAll(sub, 0o750); err != nil {
		t.Fatal(err)
	}
	p := newFakePlugin(t, root, driverName)
	p.start(t, filepath.Join(sub, "reg.sock"))
	n.eventually(t, "the driver is registered", n.registered(driverName, "node-1"))

	// Moved away whole, the directory's sockets give no event of their own.
	if err := os.Rename(sub, filepath.Join(root, "elsewhere")); err != nil {
		t.Fatal(err)
	}
	n.eventually(t, "the driver is de-registered", func() bool { _, ok := n.registry.Get(driverName); return !ok })
}
