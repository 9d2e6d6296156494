package server

import (
	"context"
	"net/http"
	"path"
	"regexp"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/nodelet/nodelet/machine"
)

// CgroupReader reads the node's cgroups for /metrics/cadvisor (machine.Reader).
type CgroupReader interface {
	// Cgroups lists root and every cgroup below it.
	Cgroups(root string) ([]string, error)
	CgroupStats(path string) (machine.CgroupStats, error)
}

// MachineFacts are the machine_* families of /metrics/cadvisor.
type MachineFacts struct {
	Info                      machine.Info
	PhysicalCores, CPUSockets int
}

// cadvisorLabels are the labels cAdvisor's container families carry on the kubelet's /metrics/cadvisor.
var cadvisorLabels = []string{"container", "id", "image", "name", "namespace", "pod"}

func cdesc(name, help string, extra ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, append(append([]string(nil), cadvisorLabels...), extra...), nil)
}

// cadvisorDescs are cAdvisor's families, with its names and help texts.
var cadvisorDescs = struct {
	cpu, cpuUser, cpuSystem, cfsPeriods, cfsThrottledPeriods, cfsThrottled                          *prometheus.Desc
	memUsage, memMax, workingSet, rss, cache, mapped, swap, failcnt, failures, activeFile, inactive *prometheus.Desc
	oom, specShares, specPeriod, specQuota, specMemLimit, specMemReservation, specSwapLimit         *prometheus.Desc
	processes, threads, threadsMax, start, created, lastSeen                                        *prometheus.Desc
	kernel, dirty, writeback, pgscan, pgsteal, refaultAnon, refaultFile, eventsHigh, eventsMax      *prometheus.Desc
	versionInfo, machineScrapeError                                                                 *prometheus.Desc
	fsUsage, fsLimit, fsInodes, fsInodesFree                                                        *prometheus.Desc
	rxBytes, rxErrors, txBytes, txErrors                                                            *prometheus.Desc
	scrapeError                                                                                     *prometheus.Desc
	machineCores, machinePhysical, machineSockets, machineMemory, machineSwap                       *prometheus.Desc
}{
	cpu:                 cdesc("container_cpu_usage_seconds_total", "Cumulative cpu time consumed in seconds.", "cpu"),
	cpuUser:             cdesc("container_cpu_user_seconds_total", "Cumulative user cpu time consumed in seconds."),
	cpuSystem:           cdesc("container_cpu_system_seconds_total", "Cumulative system cpu time consumed in seconds."),
	cfsPeriods:          cdesc("container_cpu_cfs_periods_total", "Number of elapsed enforcement period intervals."),
	cfsThrottledPeriods: cdesc("container_cpu_cfs_throttled_periods_total", "Number of throttled period intervals."),
	cfsThrottled:        cdesc("container_cpu_cfs_throttled_seconds_total", "Total time duration the container has been throttled."),
	memUsage:            cdesc("container_memory_usage_bytes", "Current memory usage in bytes, including all memory regardless of when it was accessed"),
	memMax:              cdesc("container_memory_max_usage_bytes", "Maximum memory usage recorded in bytes"),
	workingSet:          cdesc("container_memory_working_set_bytes", "Current working set in bytes."),
	rss:                 cdesc("container_memory_rss", "Size of RSS in bytes."),
	cache:               cdesc("container_memory_cache", "Number of bytes of page cache memory."),
	mapped:              cdesc("container_memory_mapped_file", "Size of memory mapped files in bytes."),
	swap:                cdesc("container_memory_swap", "Container swap usage in bytes."),
	failcnt:             cdesc("container_memory_failcnt", "Number of memory usage hits limits"),
	failures:            cdesc("container_memory_failures_total", "Cumulative count of memory allocation failures.", "failure_type", "scope"),
	activeFile:          cdesc("container_memory_total_active_file_bytes", "Current total active file in bytes."),
	inactive:            cdesc("container_memory_total_inactive_file_bytes", "Current total inactive file in bytes."),
	oom:                 cdesc("container_oom_events_total", "Count of out of memory events observed for the container"),
	specShares:          cdesc("container_spec_cpu_shares", "CPU share of the container."),
	specPeriod:          cdesc("container_spec_cpu_period", "CPU period of the container."),
	specQuota:           cdesc("container_spec_cpu_quota", "CPU quota of the container."),
	specMemLimit:        cdesc("container_spec_memory_limit_bytes", "Memory limit for the container."),
	specMemReservation:  cdesc("container_spec_memory_reservation_limit_bytes", "Memory reservation limit for the container."),
	specSwapLimit:       cdesc("container_spec_memory_swap_limit_bytes", "Memory swap limit for the container."),
	processes:           cdesc("container_processes", "Number of processes running inside the container."),
	threads:             cdesc("container_threads", "Number of threads running inside the container"),
	threadsMax:          cdesc("container_threads_max", "Maximum number of threads allowed inside the container, infinity if value is zero"),
	start:               cdesc("container_start_time_seconds", "Start time of the container since unix epoch in seconds."),
	created:             cdesc("container_creation_time_seconds", "Container creation time since unix epoch in seconds."),
	kernel:              cdesc("container_memory_kernel_usage", "Size of kernel memory allocated in bytes."),
	dirty:               cdesc("container_memory_file_dirty_bytes", "Number of bytes of file cache that has been modified but not yet written back to disk."),
	writeback:           cdesc("container_memory_file_writeback_bytes", "Number of bytes of file cache that is currently being written back to disk."),
	pgscan:              cdesc("container_memory_pgscan_total", "Cumulative number of pages scanned by the page reclaim algorithm."),
	pgsteal:             cdesc("container_memory_pgsteal_total", "Cumulative number of pages reclaimed by the page reclaim algorithm."),
	refaultAnon:         cdesc("container_memory_workingset_refault_anon_total", "Cumulative number of refaults of previously evicted anonymous pages."),
	refaultFile:         cdesc("container_memory_workingset_refault_file_total", "Cumulative number of refaults of previously evicted file pages."),
	eventsHigh:          cdesc("container_memory_events_high_total", "Cumulative count of memory.high throttle events for the container"),
	eventsMax:           cdesc("container_memory_events_max_total", "Cumulative count of memory.max limit hit events for the container"),
	versionInfo: prometheus.NewDesc("cadvisor_version_info", "A metric with a constant '1' value labeled by kernel version, OS version, docker version, cadvisor version & cadvisor revision.",
		[]string{"cadvisorRevision", "cadvisorVersion", "dockerVersion", "kernelVersion", "osVersion"}, nil),
	machineScrapeError: prometheus.NewDesc("machine_scrape_error", "1 if there was an error while getting machine metrics, 0 otherwise.", nil, nil),
	lastSeen:           cdesc("container_last_seen", "Last time a container was seen by the exporter"),
	fsUsage:            cdesc("container_fs_usage_bytes", "Number of bytes that are consumed by the container on this filesystem.", "device"),
	fsLimit:            cdesc("container_fs_limit_bytes", "Number of bytes that can be consumed by the container on this filesystem.", "device"),
	fsInodes:           cdesc("container_fs_inodes_total", "Number of Inodes", "device"),
	fsInodesFree:       cdesc("container_fs_inodes_free", "Number of available Inodes", "device"),
	rxBytes:            cdesc("container_network_receive_bytes_total", "Cumulative count of bytes received", "interface"),
	rxErrors:           cdesc("container_network_receive_errors_total", "Cumulative count of errors encountered while receiving", "interface"),
	txBytes:            cdesc("container_network_transmit_bytes_total", "Cumulative count of bytes transmitted", "interface"),
	txErrors:           cdesc("container_network_transmit_errors_total", "Cumulative count of errors encountered while transmitting", "interface"),
	scrapeError:        prometheus.NewDesc("container_scrape_error", "1 if there was an error while getting container metrics, 0 otherwise", nil, nil),
	machineCores:       prometheus.NewDesc("machine_cpu_cores", "Number of logical CPU cores.", []string{"boot_id", "machine_id", "system_uuid"}, nil),
	machinePhysical:    prometheus.NewDesc("machine_cpu_physical_cores", "Number of physical CPU cores.", []string{"boot_id", "machine_id", "system_uuid"}, nil),
	machineSockets:     prometheus.NewDesc("machine_cpu_sockets", "Number of CPU sockets.", []string{"boot_id", "machine_id", "system_uuid"}, nil),
	machineMemory:      prometheus.NewDesc("machine_memory_bytes", "Amount of memory installed on the machine.", []string{"boot_id", "machine_id", "system_uuid"}, nil),
	machineSwap:        prometheus.NewDesc("machine_swap_bytes", "Amount of swap memory available on the machine.", []string{"boot_id", "machine_id", "system_uuid"}, nil),
}

// cadvisorCollector reads the node when scraped: with a cgroup reader, every cgroup cAdvisor reports on a
// kubelet's node (the root and the pods' tree: QoS classes, pods, their containers and sandboxes) from its
// cgroup files, labelled with the pod and container the runtime says it is; without one, each running
// container's CPU and memory from the runtime's stats. Filesystem and network figures come from the runtime.
type cadvisorCollector struct {
	s   statsHandlers
	ctx context.Context
	now time.Time
}

// Describe sends nothing: the collector is unchecked, its series depend on what the node has when scraped.
func (cadvisorCollector) Describe(chan<- *prometheus.Desc) {}

// emitter sends one family's sample.
type emitter struct{ ch chan<- prometheus.Metric }

func (e emitter) gauge(d *prometheus.Desc, val float64, labels ...string) {
	e.ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, val, labels...)
}

func (e emitter) counter(d *prometheus.Desc, val float64, labels ...string) {
	e.ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, val, labels...)
}

func (c cadvisorCollector) Collect(ch chan<- prometheus.Metric) {
	e := emitter{ch}
	failed := 0.0
	v, err := c.s.readRuntime(c.ctx)
	if err != nil {
		ctrl.LoggerFrom(c.ctx).V(2).Info("No runtime figures for /metrics/cadvisor", "err", err.Error())
		v, failed = &runtimeView{containers: map[string]*runtimeapi.Container{}}, 1
	}
	ids := newCgroupIdentities(v, c.s.podSpecs(c.ctx))
	sandboxCgroup := map[string]string{} // sandbox ID → its cgroup, for the pod's network
	if r := c.s.opts.Cgroups; r != nil {
		if !c.collectCgroups(e, r, ids, sandboxCgroup) {
			failed = 1
		}
	} else {
		c.collectRuntime(e, v, ids)
	}
	c.collectFs(e, v, ids)
	for _, sb := range v.sandboxes {
		id, ok := sandboxCgroup[sb.GetId()]
		if !ok {
			id = "/" + sb.GetId()
		}
		c.podNetwork(e, v.podStats[sb.GetId()], ids.sandboxLabels(sb, id))
	}
	c.rootNetwork(e)
	c.machine(e)
	e.gauge(cadvisorDescs.scrapeError, failed)
}

// rootNetwork reports the host's interfaces under the root cgroup, as cAdvisor does.
func (c cadvisorCollector) rootNetwork(e emitter) {
	if c.s.opts.NodeStats == nil {
		return
	}
	ns, err := c.s.opts.NodeStats(c.ctx)
	if err != nil || ns.Network == nil {
		return
	}
	d := cadvisorDescs
	val := func(p *uint64) float64 {
		if p == nil {
			return 0
		}
		return float64(*p)
	}
	for _, i := range ns.Network.Interfaces {
		l := []string{"", "/", "", "", "", "", i.Name}
		e.counter(d.rxBytes, val(i.RxBytes), l...)
		e.counter(d.rxErrors, val(i.RxErrors), l...)
		e.counter(d.txBytes, val(i.TxBytes), l...)
		e.counter(d.txErrors, val(i.TxErrors), l...)
	}
}

// collectCgroups reports the root cgroup and the pods' tree; false if a cgroup could not be read.
func (c cadvisorCollector) collectCgroups(e emitter, r CgroupReader, ids cgroupIdentities, sandboxCgroup map[string]string) bool {
	ok := true
	paths := []string{"/"}
	if kp := c.s.opts.KubepodsCgroup; kp != "" {
		tree, err := r.Cgroups(kp)
		if err != nil {
			ctrl.LoggerFrom(c.ctx).V(2).Info("Listing the pods' cgroups failed", "root", kp, "err", err.Error())
			ok = false
		}
		paths = append(paths, tree...)
	}
	for _, p := range paths {
		st, err := r.CgroupStats(p)
		if err != nil {
			continue // gone since listed, or not readable: cAdvisor leaves it out too
		}
		labels, started := ids.labels(p, st.Created)
		if sb := ids.sandboxOf(p); sb != "" {
			sandboxCgroup[sb] = p
		}
		c.cgroup(e, st, labels, started)
	}
	return ok
}

// cgroup reports one cgroup's figures.
func (c cadvisorCollector) cgroup(e emitter, st machine.CgroupStats, l []string, started time.Time) {
	d := cadvisorDescs
	sec := func(ns uint64) float64 { return float64(ns) / 1e9 }
	e.counter(d.cpu, sec(st.CPUUsageNanos), append(l, "total")...)
	e.counter(d.cpuUser, sec(st.CPUUserNanos), l...)
	e.counter(d.cpuSystem, sec(st.CPUSystemNanos), l...)
	if st.CFSPeriods > 0 {
		e.counter(d.cfsPeriods, float64(st.CFSPeriods), l...)
		e.counter(d.cfsThrottledPeriods, float64(st.CFSThrottledPeriods), l...)
		e.counter(d.cfsThrottled, sec(st.CFSThrottledNanos), l...)
	}
	e.gauge(d.memUsage, float64(st.MemoryUsage), l...)
	e.gauge(d.memMax, float64(st.MemoryMaxUsage), l...)
	e.gauge(d.workingSet, float64(st.MemoryWorkingSet), l...)
	e.gauge(d.rss, float64(st.MemoryRSS), l...)
	e.gauge(d.cache, float64(st.MemoryCache), l...)
	e.gauge(d.mapped, float64(st.MemoryMappedFile), l...)
	e.gauge(d.swap, float64(st.MemorySwap), l...)
	e.counter(d.failcnt, float64(st.MemoryFailcnt), l...)
	e.counter(d.failures, float64(st.PgFault), append(l, "pgfault", "container")...)
	e.counter(d.failures, float64(st.HierarchyPgFault), append(l, "pgfault", "hierarchy")...)
	e.counter(d.failures, float64(st.PgMajFault), append(l, "pgmajfault", "container")...)
	e.counter(d.failures, float64(st.HierarchyPgMajFault), append(l, "pgmajfault", "hierarchy")...)
	e.gauge(d.kernel, float64(st.MemoryKernel), l...)
	e.gauge(d.dirty, float64(st.MemoryDirty), l...)
	e.gauge(d.writeback, float64(st.MemoryWriteback), l...)
	e.counter(d.pgscan, float64(st.PgScan), l...)
	e.counter(d.pgsteal, float64(st.PgSteal), l...)
	e.counter(d.refaultAnon, float64(st.RefaultAnon), l...)
	e.counter(d.refaultFile, float64(st.RefaultFile), l...)
	e.counter(d.eventsHigh, float64(st.EventsHigh), l...)
	e.counter(d.eventsMax, float64(st.EventsMax), l...)
	e.gauge(d.activeFile, float64(st.MemoryActiveFile), l...)
	e.gauge(d.inactive, float64(st.MemoryInactiveFile), l...)
	e.counter(d.oom, float64(st.OOMEvents), l...)
	e.gauge(d.specShares, float64(st.CPUShares), l...)
	if st.CPUPeriod > 0 {
		e.gauge(d.specPeriod, float64(st.CPUPeriod), l...)
	}
	if st.CPUQuota > 0 {
		e.gauge(d.specQuota, float64(st.CPUQuota), l...)
	}
	e.gauge(d.specMemLimit, float64(st.MemoryLimit), l...)
	e.gauge(d.specMemReservation, float64(st.MemoryReservation), l...)
	e.gauge(d.specSwapLimit, float64(st.MemorySwapLimit), l...)
	e.gauge(d.processes, float64(st.Processes), l...)
	e.gauge(d.threads, float64(st.Threads), l...)
	e.gauge(d.threadsMax, float64(st.ThreadsMax), l...)
	if !started.IsZero() {
		e.gauge(d.start, float64(started.Unix()), l...)
		e.gauge(d.created, float64(started.Unix()), l...)
	}
	e.gauge(d.lastSeen, float64(c.now.Unix()), l...)
}

// collectRuntime reports each running container's CPU and memory from the runtime's stats (no cgroups read).
func (c cadvisorCollector) collectRuntime(e emitter, v *runtimeView, ids cgroupIdentities) {
	d := cadvisorDescs
	for _, sb := range v.sandboxes {
		for _, st := range v.stats[sb.GetId()] {
			ctr := v.containers[st.GetAttributes().GetId()]
			if ctr == nil {
				continue
			}
			l := cadvisorContainerLabels(ctr, sb, "/"+ctr.GetId(), ids.specs)
			if cpu := st.GetCpu().GetUsageCoreNanoSeconds(); cpu != nil {
				e.counter(d.cpu, float64(cpu.GetValue())/1e9, append(l, "total")...)
			}
			if m := st.GetMemory(); m != nil {
				e.gauge(d.workingSet, float64(m.GetWorkingSetBytes().GetValue()), l...)
				e.gauge(d.memUsage, float64(m.GetUsageBytes().GetValue()), l...)
				e.gauge(d.rss, float64(m.GetRssBytes().GetValue()), l...)
				e.counter(d.failures, float64(m.GetPageFaults().GetValue()), append(l, "pgfault", "container")...)
				e.counter(d.failures, float64(m.GetMajorPageFaults().GetValue()), append(l, "pgmajfault", "container")...)
			}
			e.gauge(d.start, float64(ctr.GetCreatedAt())/1e9, l...)
			e.gauge(d.lastSeen, float64(c.now.Unix()), l...)
		}
	}
}

// collectFs reports each running container's writable layer (the runtime's figures) on its filesystem.
func (c cadvisorCollector) collectFs(e emitter, v *runtimeView, ids cgroupIdentities) {
	d := cadvisorDescs
	for _, sb := range v.sandboxes {
		for _, st := range v.stats[sb.GetId()] {
			ctr := v.containers[st.GetAttributes().GetId()]
			fs := st.GetWritableLayer()
			if ctr == nil || fs == nil {
				continue
			}
			id := ids.containerCgroup[ctr.GetId()]
			if id == "" {
				id = "/" + ctr.GetId()
			}
			dev := fs.GetFsId().GetMountpoint()
			l := append(cadvisorContainerLabels(ctr, sb, id, ids.specs), dev)
			e.gauge(d.fsUsage, float64(fs.GetUsedBytes().GetValue()), l...)
			if dev == "" {
				continue
			}
			if fu, err := machine.Statfs(dev); err == nil {
				e.gauge(d.fsLimit, float64(fu.CapacityBytes), l...)
				e.gauge(d.fsInodes, float64(fu.Inodes), l...)
				e.gauge(d.fsInodesFree, float64(fu.InodesFree), l...)
			}
		}
	}
}

// podNetwork reports a pod's interfaces under its sandbox's labels, as cAdvisor reports the sandbox's
// network namespace.
func (cadvisorCollector) podNetwork(e emitter, linux *runtimeapi.LinuxPodSandboxStats, l []string) {
	if linux == nil || linux.GetNetwork() == nil {
		return
	}
	d := cadvisorDescs
	for _, i := range linux.GetNetwork().GetInterfaces() {
		li := append(append([]string(nil), l...), i.GetName())
		e.counter(d.rxBytes, float64(i.GetRxBytes().GetValue()), li...)
		e.counter(d.rxErrors, float64(i.GetRxErrors().GetValue()), li...)
		e.counter(d.txBytes, float64(i.GetTxBytes().GetValue()), li...)
		e.counter(d.txErrors, float64(i.GetTxErrors().GetValue()), li...)
	}
}

// machine reports the machine_* families.
func (c cadvisorCollector) machine(e emitter) {
	if c.s.opts.Machine == nil {
		return
	}
	d := cadvisorDescs
	m, err := c.s.opts.Machine()
	if err != nil {
		e.gauge(d.machineScrapeError, 1)
		return
	}
	e.gauge(d.machineScrapeError, 0)
	e.gauge(d.versionInfo, 1, "", "", "", m.Info.KernelVersion, m.Info.OSImage)
	l := []string{m.Info.BootID, m.Info.MachineID, m.Info.SystemUUID}
	e.gauge(d.machineCores, float64(m.Info.NumCPU), l...)
	e.gauge(d.machinePhysical, float64(m.PhysicalCores), l...)
	e.gauge(d.machineSockets, float64(m.CPUSockets), l...)
	e.gauge(d.machineMemory, float64(m.Info.MemoryBytes), l...)
	e.gauge(d.machineSwap, float64(m.Info.SwapBytes), l...)
}

// cadvisorContainerLabels are cAdvisor's labels of a container: its name, its cgroup, its image (as the pod
// names it: a runtime that keeps only the image's ID is answered from the pod's spec), its runtime ID and its
// pod's namespace and name.
func cadvisorContainerLabels(ctr *runtimeapi.Container, sb *runtimeapi.PodSandbox, id string, specs map[types.UID]*corev1.Pod) []string {
	image := ctr.GetImage().GetUserSpecifiedImage()
	if image == "" {
		image = specImage(specs[types.UID(sb.GetMetadata().GetUid())], ctr.GetMetadata().GetName())
	}
	if image == "" {
		image = ctr.GetImage().GetImage()
	}
	return []string{ctr.GetMetadata().GetName(), id, image, ctr.GetId(), sb.GetMetadata().GetNamespace(), sb.GetMetadata().GetName()}
}

// specImage is the image the pod's spec gives the named container ("" if none).
func specImage(p *corev1.Pod, name string) string {
	if p == nil {
		return ""
	}
	for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for _, c := range cs {
			if c.Name == name {
				return c.Image
			}
		}
	}
	for _, c := range p.Spec.EphemeralContainers {
		if c.Name == name {
			return c.Image
		}
	}
	return ""
}

// cgroupIdentities say which pod, container or sandbox a cgroup of the pods' tree is.
type cgroupIdentities struct {
	v               *runtimeView
	sandboxes       map[string]*runtimeapi.PodSandbox // by ID
	pods            map[string]*runtimeapi.PodSandbox // by pod UID (the latest sandbox)
	containerCgroup map[string]string                 // container ID → its cgroup, filled by labels
	specs           map[types.UID]*corev1.Pod         // the node's pods, for the images they name
}

func newCgroupIdentities(v *runtimeView, specs map[types.UID]*corev1.Pod) cgroupIdentities {
	ids := cgroupIdentities{v: v, sandboxes: map[string]*runtimeapi.PodSandbox{}, pods: map[string]*runtimeapi.PodSandbox{},
		containerCgroup: map[string]string{}, specs: specs}
	for _, sb := range v.sandboxes {
		ids.sandboxes[sb.GetId()] = sb
		uid := sb.GetMetadata().GetUid()
		if old, ok := ids.pods[uid]; !ok || old.GetCreatedAt() < sb.GetCreatedAt() {
			ids.pods[uid] = sb
		}
	}
	return ids
}

var (
	// podCgroup is a pod's cgroup: pod<uid> (cgroupfs) or kubepods[-<qos>]-pod<uid with _>.slice (systemd).
	podCgroup = regexp.MustCompile(`^(?:kubepods(?:-[a-z]+)?-)?pod([0-9a-fA-F_-]{36})(?:\.slice)?$`)
	// containerCgroup is a container's cgroup: its runtime ID, bare (cgroupfs) or in a systemd scope
	// (cri-containerd-<id>.scope, crio-<id>.scope, docker-<id>.scope).
	containerCgroup = regexp.MustCompile(`^(?:[a-z-]+-)?([0-9a-f]{64})(?:\.scope)?$`)
)

// sandboxOf is the ID of the sandbox whose cgroup p is, or "".
func (ids cgroupIdentities) sandboxOf(p string) string {
	if m := containerCgroup.FindStringSubmatch(path.Base(p)); m != nil {
		if _, ok := ids.sandboxes[m[1]]; ok {
			return m[1]
		}
	}
	return ""
}

// labels are cAdvisor's labels of the cgroup at p and when what it holds started: a container's or
// sandbox's from the runtime, a pod's from its sandbox, any other cgroup's (the root, kubepods, a QoS class)
// its path alone.
func (ids cgroupIdentities) labels(p string, created time.Time) ([]string, time.Time) {
	base := path.Base(p)
	if m := containerCgroup.FindStringSubmatch(base); m != nil {
		if ctr, ok := ids.v.containers[m[1]]; ok {
			if sb := ids.sandboxes[ctr.GetPodSandboxId()]; sb != nil {
				ids.containerCgroup[ctr.GetId()] = p
				return cadvisorContainerLabels(ctr, sb, p, ids.specs), time.Unix(0, ctr.GetCreatedAt())
			}
		}
		if sb, ok := ids.sandboxes[m[1]]; ok {
			return ids.sandboxLabels(sb, p), time.Unix(0, sb.GetCreatedAt())
		}
	}
	if m := podCgroup.FindStringSubmatch(base); m != nil {
		if sb, ok := ids.pods[strings.ReplaceAll(m[1], "_", "-")]; ok {
			return []string{"", p, "", "", sb.GetMetadata().GetNamespace(), sb.GetMetadata().GetName()}, created
		}
	}
	return []string{"", p, "", "", "", ""}, created
}

// sandboxLabels are a sandbox's labels: no container name, its pod's.
func (ids cgroupIdentities) sandboxLabels(sb *runtimeapi.PodSandbox, p string) []string {
	return []string{"", p, "", sb.GetId(), sb.GetMetadata().GetNamespace(), sb.GetMetadata().GetName()}
}

// cadvisorMetrics serves /metrics/cadvisor: cAdvisor's container and machine families, read per scrape.
func (s statsHandlers) cadvisorMetrics(w http.ResponseWriter, r *http.Request) {
	reg := prometheus.NewRegistry()
	if err := reg.Register(cadvisorCollector{s: s, ctx: r.Context(), now: s.opts.Clock.Now()}); err != nil {
		writeError(w, err)
		return
	}
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}).ServeHTTP(w, r)
}
