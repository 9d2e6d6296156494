package devices

import (
	"maps"
	"slices"

	"github.com/go-logr/logr"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/nodelet/nodelet/devices/checkpoint"
)

// containerDevices are one container's devices of one resource: their IDs by NUMA node and the plugin's
// Allocate answer.
type containerDevices struct {
	ids  map[int64][]string
	resp *pluginapi.ContainerAllocateResponse
}

// all is every device ID, in order.
func (cd containerDevices) all() sets.Set[string] {
	out := sets.New[string]()
	for _, ids := range cd.ids {
		out.Insert(ids...)
	}
	return out
}

// podDevices are the assignments: pod UID → container name → resource name.
type podDevices map[types.UID]map[string]map[string]containerDevices

func (p podDevices) set(uid types.UID, container, name string, cd containerDevices) {
	if p[uid] == nil {
		p[uid] = map[string]map[string]containerDevices{}
	}
	if p[uid][container] == nil {
		p[uid][container] = map[string]containerDevices{}
	}
	p[uid][container][name] = cd
}

// holder is the pod a device of a resource is assigned to.
func (p podDevices) holder(name, id string) (types.UID, bool) {
	for uid, containers := range p {
		for _, resources := range containers {
			if cd, ok := resources[name]; ok && cd.all().Has(id) {
				return uid, true
			}
		}
	}
	return "", false
}

// inUse are the devices assigned, by resource name.
func (p podDevices) inUse() map[string]sets.Set[string] {
	out := map[string]sets.Set[string]{}
	for _, containers := range p {
		for _, resources := range containers {
			for name, cd := range resources {
				if out[name] == nil {
					out[name] = sets.New[string]()
				}
				out[name] = out[name].Union(cd.all())
			}
		}
	}
	return out
}

// entries are the checkpoint's records, in a stable order.
func (p podDevices) entries() []checkpoint.PodDevicesEntry {
	var out []checkpoint.PodDevicesEntry
	for _, uid := range slices.Sorted(maps.Keys(p)) {
		for _, container := range sortedKeys(p[uid]) {
			for _, name := range sortedKeys(p[uid][container]) {
				cd := p[uid][container][name]
				resp, err := proto.Marshal(cd.resp)
				if err != nil {
					continue // a message we built or read: it marshals
				}
				out = append(out, checkpoint.PodDevicesEntry{PodUID: string(uid), ContainerName: container, ResourceName: name,
					DeviceIDs: cd.ids, AllocResp: resp})
			}
		}
	}
	return out
}

// runOptions merges a container's Allocate answers of every resource into what its CRI config takes, as
// the kubelet does: the first value of an environment variable, a mount path, a device path, an annotation
// or a CDI device name wins (a conflict is logged); resources are taken in name order.
func (p podDevices) runOptions(log logr.Logger, uid types.UID, container string) *RunOptions {
	resources := p[uid][container]
	if len(resources) == 0 {
		return nil
	}
	g := &merger{log: log, opts: &RunOptions{Annotations: map[string]string{}}, envs: map[string]string{},
		mounts: map[string]string{}, devs: map[string]string{}, cdi: sets.New[string]()}
	for _, name := range sortedKeys(resources) {
		g.add(resources[name].resp)
	}
	return g.opts
}

// merger builds RunOptions from Allocate answers, first value first.
type merger struct {
	log                logr.Logger
	opts               *RunOptions
	envs, mounts, devs map[string]string
	cdi                sets.Set[string]
}

// first records key's value unless it has one, logging a conflicting one; it reports whether it did.
func (g *merger) first(seen map[string]string, what, key, value string) bool {
	if old, ok := seen[key]; ok {
		if old != value {
			g.log.Info(what+" has conflicting setting", "name", key, "value", value, "kept", old)
		}
		return false
	}
	seen[key] = value
	return true
}

func (g *merger) add(resp *pluginapi.ContainerAllocateResponse) {
	for _, k := range sortedKeys(resp.GetEnvs()) {
		if g.first(g.envs, "Environment variable", k, resp.Envs[k]) {
			g.opts.Envs = append(g.opts.Envs, &runtimeapi.KeyValue{Key: k, Value: []byte(resp.Envs[k])})
		}
	}
	for _, m := range resp.GetMounts() {
		if g.first(g.mounts, "Container mount", m.ContainerPath, m.HostPath) {
			g.opts.Mounts = append(g.opts.Mounts, &runtimeapi.Mount{ContainerPath: m.ContainerPath, HostPath: m.HostPath, Readonly: m.ReadOnly})
		}
	}
	for _, d := range resp.GetDevices() {
		if g.first(g.devs, "Container device", d.ContainerPath, d.HostPath) {
			g.opts.Devices = append(g.opts.Devices, &runtimeapi.Device{ContainerPath: d.ContainerPath, HostPath: d.HostPath, Permissions: d.Permissions})
		}
	}
	for _, k := range sortedKeys(resp.GetAnnotations()) {
		g.first(g.opts.Annotations, "Annotation", k, resp.Annotations[k])
	}
	for _, d := range resp.GetCdiDevices() {
		if !g.cdi.Has(d.Name) {
			g.cdi.Insert(d.Name)
			g.opts.CDIDevices = append(g.opts.CDIDevices, &runtimeapi.CDIDevice{Name: d.Name})
		}
	}
}

// RunOptions are what a container's devices add to its CRI config: environment variables, mounts and
// devices (before the container's own), annotations (under the agent's own) and CDI devices.
type RunOptions struct {
	Envs        []*runtimeapi.KeyValue
	Mounts      []*runtimeapi.Mount
	Devices     []*runtimeapi.Device
	Annotations map[string]string
	CDIDevices  []*runtimeapi.CDIDevice
}
