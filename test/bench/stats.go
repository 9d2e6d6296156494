package main

import (
	"math"
	"slices"
	"time"
)

// summary is a series' figures in seconds.
type summary struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// summarize computes nearest-rank percentiles of d (the zero summary for an empty series).
func summarize(d []time.Duration) summary {
	if len(d) == 0 {
		return summary{}
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return summary{
		N:   len(s),
		P50: seconds(percentile(s, 50)),
		P90: seconds(percentile(s, 90)),
		P99: seconds(percentile(s, 99)),
		Max: seconds(s[len(s)-1]),
	}
}

// percentile is the nearest-rank percentile of the sorted, non-empty s: the value of rank ⌈p/100·n⌉.
func percentile(sorted []time.Duration, p float64) time.Duration {
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

func seconds(d time.Duration) float64 { return d.Seconds() }

// round3 rounds to the millisecond, for the JSON line.
func round3(f float64) float64 { return math.Round(f*1000) / 1000 }
