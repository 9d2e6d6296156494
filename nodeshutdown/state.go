package nodeshutdown

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodelet/nodelet/internal/atomicfile"
)

// StateFile is the kubelet's record of the last graceful shutdown, in the root directory.
const StateFile = "graceful_node_shutdown_state"

// state is the last shutdown's start and end (zero while it runs), in the kubelet's JSON.
type state struct {
	StartTime time.Time `json:"startTime"`
	EndTime   time.Time `json:"endTime"`
}

// loadState reads the state file of dir; none is an empty state.
func loadState(dir string) (state, error) {
	var st state
	if dir == "" {
		return st, nil
	}
	b, err := os.ReadFile(filepath.Join(dir, StateFile))
	if errors.Is(err, fs.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, err
	}
	return st, json.Unmarshal(b, &st)
}

// saveState writes the state file atomically.
func saveState(dir string, st state) error {
	if dir == "" {
		return nil
	}
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(dir, StateFile), b, 0o644)
}

// metrics are the kubelet's graceful shutdown gauges.
type metrics struct {
	start, end prometheus.Gauge
}

func newMetrics() *metrics {
	return &metrics{
		start: prometheus.NewGauge(prometheus.GaugeOpts{Name: "kubelet_graceful_shutdown_start_time_seconds",
			Help: "Last graceful shutdown start time since unix epoch in seconds"}),
		end: prometheus.NewGauge(prometheus.GaugeOpts{Name: "kubelet_graceful_shutdown_end_time_seconds",
			Help: "Last graceful shutdown end time since unix epoch in seconds"}),
	}
}

func (m *metrics) register(reg prometheus.Registerer) error {
	if reg == nil {
		return nil
	}
	return errors.Join(reg.Register(m.start), reg.Register(m.end))
}

// set shows a state: its times in seconds, zero for a time not set.
func (m *metrics) set(st state) {
	seconds := func(t time.Time) float64 {
		if t.IsZero() {
			return 0
		}
		return float64(t.Unix())
	}
	m.start.Set(seconds(st.StartTime))
	m.end.Set(seconds(st.EndTime))
}
