package agent

import (
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/nodelet/nodelet/dra"
	"github.com/nodelet/nodelet/volumes"
	"github.com/nodelet/nodelet/volumes/csi"
)

// csiPlugins runs the node side of CSI for the volume manager m: the plugin watcher on
// <root-dir>/plugins_registry registering CSI drivers (and DRA drivers' plugins with the DRA manager), and
// (with an API server) the node's CSINode object and the Node's CSI annotation and labels kept in line
// with them.
func (host) csiPlugins(a *Agent, m *volumes.Manager, claims *dra.Manager) {
	opts := csi.Options{RootDir: a.cfg.RootDir, NodeName: a.cfg.NodeName, Clock: a.clock(),
		Handlers: map[string]csi.Handler{registerapi.DRAPlugin: claims.Plugins()}}
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
