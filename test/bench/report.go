package main

import (
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// The aims of the testbed notes ("The physical floor for pod start"): they are printed, never enforced.
const (
	targetRatio       = 1.2
	targetBurstP99Sec = 1.0
)

const (
	agentFloor   = "floor"
	agentKubelet = "kubelet"
	agentNodelet = "nodelet"
)

// seriesKey names one measured series: what (e.g. "single-pod start") by whom (floor or nodelet).
type seriesKey struct{ what, agent string }

// report collects the series of one run, in the order they are printed. It is used from one goroutine.
type report struct {
	cfg    config
	order  []seriesKey
	series map[seriesKey][]time.Duration
	idle   map[string]idleResult // by agent
}

func newReport(cfg config) *report {
	r := &report{cfg: cfg, series: map[seriesKey][]time.Duration{}, idle: map[string]idleResult{}}
	agents := r.agents()
	for _, what := range []string{r.singleStart(), r.burstStart()} {
		r.order = append(r.order, seriesKey{what, agentFloor})
		for _, a := range agents {
			r.order = append(r.order, seriesKey{what, a})
		}
	}
	for _, what := range []string{r.singleDelete(), r.burstDelete(), r.resizeApplied()} {
		for _, a := range agents {
			r.order = append(r.order, seriesKey{what, a})
		}
	}
	return r
}

// agents are the node agents measured, in the order they run.
func (r *report) agents() []string {
	if r.cfg.kubelet {
		return []string{agentKubelet, agentNodelet}
	}
	return []string{agentNodelet}
}

func (r *report) singleStart() string   { return "single-pod start" }
func (r *report) singleDelete() string  { return "single-pod delete" }
func (r *report) burstStart() string    { return fmt.Sprintf("burst-%d start", r.cfg.burst) }
func (r *report) burstDelete() string   { return fmt.Sprintf("burst-%d delete", r.cfg.burst) }
func (r *report) resizeApplied() string { return "in-place resize" }

func (r *report) add(what, agent string, d ...time.Duration) {
	k := seriesKey{what, agent}
	r.series[k] = append(r.series[k], d...)
}

func (r *report) summary(what, agent string) summary {
	return summarize(r.series[seriesKey{what, agent}])
}

// ratio is a/b, or 0 when either side was not measured.
func ratio(a, b float64) float64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	return a / b
}

func (r *report) print(w io.Writer) {
	for _, k := range r.order {
		s := r.summary(k.what, k.agent)
		if s.N == 0 {
			fmt.Fprintf(w, "BENCH %-18s %-7s n=0 (not measured)\n", k.what, k.agent)
			continue
		}
		fmt.Fprintf(w, "BENCH %-18s %-7s n=%d p50=%.3f p90=%.3f p99=%.3f max=%.3f\n",
			k.what, k.agent, s.N, s.P50, s.P90, s.P99, s.Max)
	}
	for _, a := range r.agents() {
		single, burst, burstP99 := r.ratios(a)
		fmt.Fprintf(w, "BENCH ratio single p50 %s/floor = %s (target <= %.1f)\n", a, fmtRatio(single), targetRatio)
		fmt.Fprintf(w, "BENCH ratio burst p99 %s/floor = %s (target <= %.1f); burst p99 %s = %s (target <= %.1fs)\n",
			a, fmtRatio(burst), targetRatio, a, fmtSeconds(burstP99), targetBurstP99Sec)
	}
	for _, a := range r.agents() {
		i, ok := r.idle[a]
		if !ok {
			fmt.Fprintf(w, "BENCH idle %s (not measured)\n", a)
			continue
		}
		fmt.Fprintf(w, "BENCH idle %s %d pods %.0fs: cpu=%.2fs rss=%.1fMiB (file %.1f, anon %.1f; used in the window: file %.1f, anon %.1f) api=[%s] cri=[%s] pod-state-reads=[%s]\n",
			a, i.Pods, i.Window, i.CPU, i.RSSMiB, i.RSSFileMiB, i.RSSAnonMiB, i.UsedFileMiB, i.UsedAnonMiB,
			formatCounts(i.API), formatCounts(i.CRI), formatCounts(i.Reads))
		if st := i.Startup; st != nil {
			fmt.Fprintf(w, "BENCH idle %s at start-up (its binary's package initializers, no work): rss=%.1fMiB (file %.1f, anon %.1f)\n",
				a, st.RSSMiB, st.FileMiB, st.AnonMiB)
		}
		if len(i.LoopCPU) > 0 {
			fmt.Fprintf(w, "BENCH idle %s loops cpu-seconds=[%s] passes=[%s]\n", a, formatValues(i.LoopCPU, "%.3f %s"), formatCounts(i.LoopPasses))
		}
	}
	if k, n := r.idle[agentKubelet], r.idle[agentNodelet]; k.CPU > 0 && n.Pods > 0 {
		fmt.Fprintf(w, "BENCH idle nodelet/kubelet: cpu=%.2f rss=%.2f\n", n.CPU/k.CPU, n.RSSMiB/k.RSSMiB)
	}
	b, err := json.Marshal(r.jsonReport())
	if err != nil { // cannot happen: plain data
		b = []byte(fmt.Sprintf(`{"error":%q}`, err.Error()))
	}
	fmt.Fprintf(w, "BENCHJSON %s\n", b)
}

// ratios: the agent's single p50 / the floor's, its burst p99 / the floor's, and its burst p99 in seconds.
func (r *report) ratios(agent string) (single, burst, burstP99 float64) {
	single = ratio(r.summary(r.singleStart(), agent).P50, r.summary(r.singleStart(), agentFloor).P50)
	nb := r.summary(r.burstStart(), agent)
	burst = ratio(nb.P99, r.summary(r.burstStart(), agentFloor).P99)
	return single, burst, nb.P99
}

func fmtRatio(f float64) string {
	if f == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", f)
}

func fmtSeconds(f float64) string {
	if f == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.3fs", f)
}

type jsonSeries struct {
	Series  string    `json:"series"`
	Agent   string    `json:"agent"`
	Summary summary   `json:"summary"`
	Samples []float64 `json:"samples"`
}

type jsonReport struct {
	Node               string       `json:"node"`
	Image              string       `json:"image"`
	Single             int          `json:"single"`
	Burst              int          `json:"burst"`
	Series             []jsonSeries `json:"series"`
	RatioSingleP50     float64      `json:"ratio_single_p50"`
	RatioBurstP99      float64      `json:"ratio_burst_p99"`
	BurstP99Nodelet    float64      `json:"burst_p99_nodelet"`
	TargetRatio        float64      `json:"target_ratio"`
	TargetBurstP99Secs float64      `json:"target_burst_p99_seconds"`
	RatiosMeasured     bool         `json:"ratios_measured"`
	// The kubelet's, when measured in the same run.
	RatioSingleP50Kubelet float64               `json:"ratio_single_p50_kubelet,omitempty"`
	RatioBurstP99Kubelet  float64               `json:"ratio_burst_p99_kubelet,omitempty"`
	Idle                  map[string]idleResult `json:"idle"`
}

func (r *report) jsonReport() jsonReport {
	single, burst, burstP99 := r.ratios(agentNodelet)
	ks, kb, _ := r.ratios(agentKubelet)
	j := jsonReport{
		RatioSingleP50Kubelet: round3(ks), RatioBurstP99Kubelet: round3(kb),
		Node: r.cfg.node, Image: r.cfg.image, Single: r.cfg.single, Burst: r.cfg.burst,
		RatioSingleP50: round3(single), RatioBurstP99: round3(burst), BurstP99Nodelet: round3(burstP99),
		TargetRatio: targetRatio, TargetBurstP99Secs: targetBurstP99Sec,
		RatiosMeasured: single > 0 && burst > 0, Idle: r.idle,
	}
	for _, k := range r.order {
		s := r.summary(k.what, k.agent)
		samples := make([]float64, 0, len(r.series[k]))
		for _, d := range r.series[k] {
			samples = append(samples, round3(d.Seconds()))
		}
		s.P50, s.P90, s.P99, s.Max = round3(s.P50), round3(s.P90), round3(s.P99), round3(s.Max)
		j.Series = append(j.Series, jsonSeries{Series: k.what, Agent: k.agent, Summary: s, Samples: samples})
	}
	return j
}
