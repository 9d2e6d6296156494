package csi_test

import (
	"fmt"

	"github.com/nodelet/nodelet/volumes/csi"
)

// The volume manager finds a driver's node service by name; until the driver's registrar has put its
// socket in <root-dir>/plugins_registry and the driver is registered, the kubelet's error says so.
func ExampleRegistry_NodeClient() {
	m := csi.New(csi.Options{RootDir: "/var/lib/kubelet", NodeName: "node-1"})
	// go m.Start(ctx) watches /var/lib/kubelet/plugins_registry.
	_, err := m.Registry().NodeClient("hostpath.csi.k8s.io")
	fmt.Println(err)
	// Output: driver name hostpath.csi.k8s.io not found in the list of registered CSI drivers
}
