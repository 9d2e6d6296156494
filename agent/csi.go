package agent

import (
	"github.com/nodelet/nodelet/volumes"
	"github.com/nodelet/nodelet/volumes/csi"
)

// csiPlugins runs the node side of CSI for the volume manager m: the plugin watcher on
// <root-dir>/plugins_registry registering CSI drivers, and (with an API server) the node's CSINode object
// and the Node's CSI annotation and labels kept in line with them.
func (host) csiPlugins(a *Agent, m *volumes.Manager) {
	opts := csi.Options{RootDir: a.cfg.RootDir, NodeName: a.cfg.NodeName, Clock: a.clock()}
	a.api.csiObjects(a, &opts)
	c := csi.New(opts)
	m.CSI = csiDrivers{c.Registry()}
	m.RefreshCSIDriver = c.RefreshDriver
	a.local = append(a.local, c)
}

// csiDrivers gives the volume manager the registered drivers' node clients.
type csiDrivers struct{ registry *csi.Registry }

func (d csiDrivers) NodeClient(driver string) (volumes.CSINodeClient, error) {
	c, err := d.registry.NodeClient(driver)
	if err != nil {
		return nil, err
	}
	return c, nil
}
