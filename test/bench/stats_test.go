package main

import (
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

func TestPercentileNearestRank(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		d := make([]time.Duration, len(v))
		for i, x := range v {
			d[i] = time.Duration(x) * time.Millisecond
		}
		return d
	}
	s := summarize(ms(100, 10, 90, 20, 80, 30, 70, 40, 60, 50)) // 10..100 shuffled
	if s.N != 10 || s.P50 != 0.05 || s.P90 != 0.09 || s.P99 != 0.1 || s.Max != 0.1 {
		t.Errorf("summary of 10..100ms = %+v", s)
	}
	one := summarize(ms(7))
	if one.P50 != 0.007 || one.P99 != 0.007 || one.Max != 0.007 {
		t.Errorf("summary of one = %+v", one)
	}
	if z := summarize(nil); z.N != 0 {
		t.Errorf("summary of none = %+v", z)
	}
	thirty := make([]int, 30)
	for i := range thirty {
		thirty[i] = i + 1
	}
	s30 := summarize(ms(thirty...))
	// ranks: p50 ⌈15⌉=15, p90 ⌈27⌉=27, p99 ⌈29.7⌉=30.
	if s30.P50 != 0.015 || s30.P90 != 0.027 || s30.P99 != 0.03 {
		t.Errorf("summary of 1..30ms = %+v", s30)
	}
}

func TestProcessMemory(t *testing.T) {
	pid := strconv.Itoa(os.Getpid())
	m, err := processMemory(pid)
	if err != nil {
		t.Fatal(err)
	}
	if m.rss <= 0 || m.file <= 0 || m.anon <= 0 || m.rss < m.file || m.rss < m.anon {
		t.Errorf("resident memory %+v: want RSS, file-backed and anonymous parts all positive, the parts within RSS", m)
	}
	if m.usedFile <= 0 || m.usedAnon <= 0 {
		t.Errorf("used memory %+v: want the test binary's pages accessed (none cleared)", m)
	}
}

// A binary run to its first write: GNU true prints its version on --version, which blocks on the full pipe.
func TestStartupMemory(t *testing.T) {
	exe, err := exec.LookPath("true")
	if err != nil {
		t.Skip("no true(1) on this machine")
	}
	m, err := startupMemory(t.Context(), exe)
	if err != nil {
		t.Fatal(err)
	}
	if m.rss <= 0 || m.file <= 0 || m.rss < m.file {
		t.Errorf("start-up memory of %s %+v: want RSS and its file-backed part positive", exe, m)
	}
}
