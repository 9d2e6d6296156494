package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime"
)

// idleSnapshot is what the idle phase reads of the nodelet process at one instant.
type idleSnapshot struct {
	cpu time.Duration // user + system
	mem memory
	// counters by label value: API requests by HTTP method, CRI operations by type, pod state reads by source.
	api, cri, reads map[string]float64
	// nodelet's periodic loops: CPU seconds and passes by loop (none for the kubelet).
	loopCPU, loopPasses map[string]float64
}

// idleResult is the cost of nodelet holding idlePods running pods for the idle window.
type idleResult struct {
	Pods   int     `json:"pods"`
	Window float64 `json:"window_seconds"`
	CPU    float64 `json:"cpu_seconds"`
	RSSMiB float64 `json:"rss_mib"`
	// The RSS's pages backed by files (the binary's) and anonymous ones, and of each the part used (accessed) in
	// the window: what the agent works with at idle, against what start-up left resident.
	RSSFileMiB  float64            `json:"rss_file_mib"`
	RSSAnonMiB  float64            `json:"rss_anon_mib"`
	UsedFileMiB float64            `json:"used_file_mib"`
	UsedAnonMiB float64            `json:"used_anon_mib"`
	API         map[string]float64 `json:"api_requests_by_method"`
	CRI         map[string]float64 `json:"cri_operations_by_type"`
	Reads       map[string]float64 `json:"pod_state_reads_by_source"`
	// LoopCPU and LoopPasses are what each of nodelet's periodic loops cost in the window.
	LoopCPU    map[string]float64 `json:"loop_cpu_seconds,omitempty"`
	LoopPasses map[string]float64 `json:"loop_passes,omitempty"`
	// Startup is the RSS of the agent's binary once its package initializers have run, before any work
	// (startupMemory): the part of the idle RSS that its libraries set.
	Startup *startupResult `json:"startup,omitempty"`
}

// startupResult is an agent binary's resident memory at start-up, in MiB.
type startupResult struct {
	RSSMiB  float64 `json:"rss_mib"`
	FileMiB float64 `json:"rss_file_mib"`
	AnonMiB float64 `json:"rss_anon_mib"`
}

// idle starts cfg.idlePods pods, waits until they run and the agent settled, then measures what nodelet
// costs over cfg.idleWindow with nothing changing: CPU time, RSS at the end (file-backed and anonymous, and how
// much of each was used in the window), and the API requests, CRI operations and pod state reads it made (from
// its own /metrics, read with the admin credentials).
func (n *nodeletBench) idle(ctx context.Context, r *report) error {
	if n.cfg.idlePods <= 0 {
		return nil
	}
	names := make([]string, n.cfg.idlePods)
	for i := range names {
		names[i] = fmt.Sprintf("idle-%02d", i)
	}
	logf("%s: idle cost of %d running pods over %s", n.agent, len(names), n.cfg.idleWindow)
	if _, err := together(names, func(name string, t0 time.Time) (time.Duration, error) {
		return n.createAndWait(ctx, name, t0)
	}); err != nil {
		return err
	}
	if err := sleepCtx(ctx, 5*time.Second); err != nil { // the last status writes and probes settle
		return err
	}
	if err := waitRuntimeSettled(ctx, n.cfg, n.agent); err != nil {
		return err
	}
	m, err := newMetricsReader(n.cfg)
	if err != nil {
		return err
	}
	before, err := m.snapshot(ctx)
	if err != nil {
		return err
	}
	if err := m.clearReferenced(); err != nil {
		return err
	}
	if err := sleepCtx(ctx, n.cfg.idleWindow); err != nil {
		return err
	}
	after, err := m.snapshot(ctx)
	if err != nil {
		return err
	}
	r.idle[n.agent] = idleResult{Pods: len(names), Window: n.cfg.idleWindow.Seconds(),
		CPU: round3((after.cpu - before.cpu).Seconds()), RSSMiB: mib(after.mem.rss),
		RSSFileMiB: mib(after.mem.file), RSSAnonMiB: mib(after.mem.anon),
		UsedFileMiB: mib(after.mem.usedFile), UsedAnonMiB: mib(after.mem.usedAnon),
		API: delta(before.api, after.api), CRI: delta(before.cri, after.cri), Reads: delta(before.reads, after.reads),
		LoopCPU: roundAll(delta(before.loopCPU, after.loopCPU)), LoopPasses: delta(before.loopPasses, after.loopPasses)}
	if st, err := m.startup(ctx); err != nil {
		logf("%s: warning: no start-up memory: %v", n.agent, err)
	} else {
		i := r.idle[n.agent]
		i.Startup = &startupResult{RSSMiB: mib(st.rss), FileMiB: mib(st.file), AnonMiB: mib(st.anon)}
		r.idle[n.agent] = i
	}
	logf("%s: deleting the %d idle pods", n.agent, len(names))
	_, err = together(names, func(name string, t0 time.Time) (time.Duration, error) {
		return n.deleteAndWait(ctx, name, t0)
	})
	return err
}

// settleLimit bounds the wait for an agent's deferred cleanup before the idle window.
const settleLimit = 3 * time.Minute

// waitRuntimeSettled waits until the runtime holds no stopped sandbox (the earlier phases' deleted pods), so
// that the idle window measures holding running pods and not the agent's deferred cleanup: the kubelet
// removes a deleted pod's sandbox in its container GC, once a minute, nodelet when the pod is gone. After
// settleLimit it measures anyway and says so.
func waitRuntimeSettled(ctx context.Context, cfg config, agent string) error {
	cri, err := runtime.Dial(cfg.criEndpoint, runtime.Options{Timeout: apiLimit})
	if err != nil {
		return err
	}
	defer func() { _ = cri.Close() }()
	start := time.Now()
	for {
		listed, err := cri.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{
			State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY},
		})
		if err != nil {
			return fmt.Errorf("list stopped sandboxes: %w", err)
		}
		if len(listed) == 0 {
			logf("%s: no stopped sandbox left after %s; measuring", agent, time.Since(start).Round(time.Second))
			return nil
		}
		if time.Since(start) > settleLimit {
			logf("%s: still %d stopped sandboxes after %s; measuring with its cleanup in the window", agent, len(listed), settleLimit)
			return nil
		}
		if err := sleepCtx(ctx, 2*time.Second); err != nil {
			return err
		}
	}
}

func mib(bytes int64) float64 { return round3(float64(bytes) / (1 << 20)) }

func roundAll(m map[string]float64) map[string]float64 {
	for k, v := range m {
		m[k] = round3(v)
	}
	return m
}

func delta(before, after map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

// metricsReader reads the nodelet process's /proc entries and its /metrics.
type metricsReader struct {
	pidFile string
	url     string
	client  *http.Client
}

func newMetricsReader(cfg config) (*metricsReader, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", cfg.kubeconfig)
	if err != nil {
		return nil, err
	}
	tc, err := rest.TLSConfigFor(rc)
	if err != nil {
		return nil, err
	}
	if tc == nil {
		tc = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	tc.RootCAs, tc.InsecureSkipVerify = nil, true // nodelet's serving certificate is its own; only its figures matter here
	return &metricsReader{
		pidFile: filepath.Join(cfg.bedDir, "pids", "nodelet.pid"),
		url:     "https://127.0.0.1:10250/metrics",
		client:  &http.Client{Timeout: apiLimit, Transport: &http.Transport{TLSClientConfig: tc}},
	}, nil
}

func (m *metricsReader) pid() (string, error) {
	b, err := os.ReadFile(m.pidFile)
	return strings.TrimSpace(string(b)), err
}

// startup runs the agent's own binary (the running process's executable) to its first write and reads its
// RSS there (startupMemory).
func (m *metricsReader) startup(ctx context.Context) (memory, error) {
	pid, err := m.pid()
	if err != nil {
		return memory{}, err
	}
	exe, err := agentExecutable(pid)
	if err != nil {
		return memory{}, err
	}
	return startupMemory(ctx, exe)
}

// clearReferenced clears the accessed bits of the process's pages (/proc/<pid>/clear_refs), so that the next
// snapshot's used figures are the pages accessed since.
func (m *metricsReader) clearReferenced() error {
	pid, err := m.pid()
	if err != nil {
		return err
	}
	return os.WriteFile("/proc/"+pid+"/clear_refs", []byte("1"), 0)
}

func (m *metricsReader) snapshot(ctx context.Context) (idleSnapshot, error) {
	var s idleSnapshot
	pid, err := m.pid()
	if err != nil {
		return s, err
	}
	if s.cpu, err = processCPU(pid); err != nil {
		return s, err
	}
	if s.mem, err = processMemory(pid); err != nil {
		return s, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.url, nil)
	if err != nil {
		return s, err
	}
	resp, err := m.client.Do(req)
	if err != nil {
		return s, fmt.Errorf("nodelet /metrics: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	text, err := io.ReadAll(resp.Body)
	if err != nil {
		return s, err
	}
	if resp.StatusCode != http.StatusOK {
		return s, fmt.Errorf("nodelet /metrics: %s: %s", resp.Status, text)
	}
	s.api = counterBy(string(text), "rest_client_requests_total", "method")
	s.cri = counterBy(string(text), "kubelet_runtime_operations_total", "operation_type")
	s.reads = counterBy(string(text), "nodelet_pod_state_reads_total", "source")
	s.loopCPU = counterBy(string(text), "nodelet_loop_cpu_seconds_total", "loop")
	s.loopPasses = counterBy(string(text), "nodelet_loop_passes_total", "loop")
	return s, nil
}

// processCPU is the process's user + system time from /proc/<pid>/stat.
func processCPU(pid string) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0, err
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%s/stat: too few fields", pid)
	}
	var ticks int64
	for _, f := range fields[11:13] { // utime, stime (fields 14 and 15 of stat)
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%s/stat: %w", pid, err)
		}
		ticks += v
	}
	return time.Duration(ticks) * time.Second / 100, nil // USER_HZ is 100 on Linux
}

// memory is a process's resident memory in bytes: all of it, the file-backed and the anonymous part, and of
// those the pages accessed since its accessed bits were last cleared.
type memory struct{ rss, file, anon, usedFile, usedAnon int64 }

// processMemory reads VmRSS, RssFile and RssAnon from /proc/<pid>/status and the Referenced figures of each
// mapping from /proc/<pid>/smaps (a mapping of a file counts as file-backed).
func processMemory(pid string) (memory, error) {
	m, err := residentMemory(pid)
	if err != nil {
		return m, err
	}
	m.usedFile, m.usedAnon, err = referencedMemory(pid)
	return m, err
}

func residentMemory(pid string) (memory, error) {
	var m memory
	status, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return m, err
	}
	fields := map[string]*int64{"VmRSS:": &m.rss, "RssFile:": &m.file, "RssAnon:": &m.anon}
	for line := range strings.SplitSeq(string(status), "\n") {
		if f := strings.Fields(line); len(f) == 3 && fields[f[0]] != nil {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return m, fmt.Errorf("/proc/%s/status: %s: %w", pid, f[0], err)
			}
			*fields[f[0]] = kb << 10
			delete(fields, f[0])
		}
	}
	if len(fields) > 0 {
		return m, fmt.Errorf("/proc/%s/status: no %s", pid, slices.Sorted(maps.Keys(fields)))
	}
	return m, nil
}

func referencedMemory(pid string) (file, anon int64, err error) {
	smaps, err := os.ReadFile("/proc/" + pid + "/smaps")
	if err != nil {
		return 0, 0, err
	}
	fileBacked := false
	for line := range strings.SplitSeq(string(smaps), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 5 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":"): // a mapping's header
			fileBacked = len(f) >= 6 && strings.HasPrefix(f[5], "/")
		case len(f) == 3 && f[0] == "Referenced:":
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return 0, 0, fmt.Errorf("/proc/%s/smaps: %w", pid, err)
			}
			if fileBacked {
				file += kb << 10
			} else {
				anon += kb << 10
			}
		}
	}
	return file, anon, nil
}

var sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)\{([^}]*)\} (\S+)`)

// counterBy sums the samples of a counter in Prometheus text format by the value of one label.
func counterBy(text, name, label string) map[string]float64 {
	out := map[string]float64{}
	for line := range strings.SplitSeq(text, "\n") {
		m := sampleLine.FindStringSubmatch(line)
		if m == nil || m[1] != name {
			continue
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			continue
		}
		for pair := range strings.SplitSeq(m[2], ",") {
			if k, val, ok := strings.Cut(pair, "="); ok && k == label {
				out[strings.Trim(val, `"`)] += v
			}
		}
	}
	return out
}

// formatCounts prints counts as "12 GET + 6 PUT", largest first.
func formatCounts(m map[string]float64) string { return formatValues(m, "%.0f %s") }

// formatValues prints values with format (a number and a name), largest first.
func formatValues(m map[string]float64, format string) string {
	if len(m) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if m[a] != m[b] {
			if m[a] > m[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf(format, m[k], k))
	}
	return strings.Join(parts, " + ")
}
