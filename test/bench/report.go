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
	agentNodelet = "nodelet"
)

// seriesKey names one measured series: what (e.g. "single-pod start") by whom (floor or nodelet).
type seriesKey struct{ what, agent string }

// report collects the series of one run, in the order they are printed. It is used from one goroutine.
type report struct {
	cfg    config
	order  []seriesKey
	series map[seriesKey][]time.Duration
	idle   idleResult
}

func newReport(cfg config) *report {
	r := &report{cfg: cfg, series: map[seriesKey][]time.Duration{}}
	r.order = []seriesKey{
		{r.singleStart(), agentFloor}, {r.singleStart(), agentNodelet},
		{r.burstStart(), agentFloor}, {r.burstStart(), agentNodelet},
		{r.singleDelete(), agentNodelet}, {r.burstDelete(), agentNodelet}, {r.resizeApplied(), agentNodelet},
	}
	return r
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
	single, burst, burstP99 := r.ratios()
	fmt.Fprintf(w, "BENCH ratio single p50 nodelet/floor = %s (target <= %.1f)\n", fmtRatio(single), targetRatio)
	fmt.Fprintf(w, "BENCH ratio burst p99 nodelet/floor = %s (target <= %.1f); burst p99 nodelet = %s (target <= %.1fs)\n",
		fmtRatio(burst), targetRatio, fmtSeconds(burstP99), targetBurstP99Sec)
	if i := r.idle; i.Measure {
		fmt.Fprintf(w, "BENCH idle %d pods %.0fs: cpu=%.2fs rss=%.1fMiB api=[%s] cri=[%s] pod-state-reads=[%s]\n",
			i.Pods, i.Window, i.CPU, i.RSSMiB, formatCounts(i.API), formatCounts(i.CRI), formatCounts(i.Reads))
	} else {
		fmt.Fprintf(w, "BENCH idle (not measured)\n")
	}
	b, err := json.Marshal(r.jsonReport())
	if err != nil { // cannot happen: plain data
		b = []byte(fmt.Sprintf(`{"error":%q}`, err.Error()))
	}
	fmt.Fprintf(w, "BENCHJSON %s\n", b)
}

// ratios: single p50 nodelet/floor, burst p99 nodelet/floor, and nodelet's burst p99 in seconds.
func (r *report) ratios() (single, burst, burstP99 float64) {
	single = ratio(r.summary(r.singleStart(), agentNodelet).P50, r.summary(r.singleStart(), agentFloor).P50)
	nb := r.summary(r.burstStart(), agentNodelet)
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
	Idle               idleResult   `json:"idle"`
}

func (r *report) jsonReport() jsonReport {
	single, burst, burstP99 := r.ratios()
	j := jsonReport{
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
