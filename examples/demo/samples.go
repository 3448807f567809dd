package main

import (
	"math"
	"slices"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/examples/internal/loadlab"
)

// sample is one second of the demo: what every server received and what HAProxy shows.
type sample struct {
	T       time.Duration // since the traffic started
	Phase   int           // 1 = without weighting, 2 = with haproxy-weighter
	Loads   []float64     // bytes/s received by each sink in the last second
	Control []float64     // the same for the control HAProxy's sinks
	Weights []int         // HAProxy weight of each server
	Conns   []int         // open connections of each server
	Late    bool          // taken more than 1.5 s after the previous one: the machine is busy
}

// smoothWindow is how many seconds of load are averaged before taking max/mean:
// one-second counts are noisy. 10 s is the simulator's window (max/mean over 10 s
// windows), so the demo's figures compare with docs/research/simulator-sweep.md.
const smoothWindow = 10

// loadsOf and controlOf pick which HAProxy's servers a statistic is about.
func loadsOf(s sample) []float64   { return s.Loads }
func controlOf(s sample) []float64 { return s.Control }

// smoothed returns the servers' loads averaged over the last smoothWindow samples
// of the same phase, ending at index i.
func smoothed(s []sample, i int) []float64 { return smoothedOf(s, i, loadsOf) }

// smoothedOf is smoothed for the loads that pick selects.
func smoothedOf(s []sample, i int, pick func(sample) []float64) []float64 {
	out := make([]float64, len(pick(s[i])))
	n := 0
	for j := i; j >= 0 && j > i-smoothWindow && s[j].Phase == s[i].Phase; j-- {
		for k, v := range pick(s[j]) {
			out[k] += v
		}
		n++
	}
	for k := range out {
		out[k] /= float64(n)
	}
	return out
}

// maxOverMean is the imbalance of one set of loads: the busiest server's load over the
// mean (1 = perfectly even). NaN when there is no load.
func maxOverMean(loads []float64) float64 { return loadlab.MaxOverMean(loads) }

// imbalance is max/mean of the smoothed loads at sample i.
func imbalance(s []sample, i int) float64 { return maxOverMean(smoothed(s, i)) }

// imbalanceOf is imbalance for the loads that pick selects.
func imbalanceOf(s []sample, i int, pick func(sample) []float64) float64 {
	return maxOverMean(smoothedOf(s, i, pick))
}

// phaseStats summarises the second half of one phase (the first half lets connections
// churn after the start or after the weighter begins).
type phaseStats struct {
	Seconds  int           // samples in the window
	From, To time.Duration // the window
	Median   float64       // median of max/mean
	Mean     float64       // mean of max/mean
}

// summarise computes phaseStats for phase p over its second half.
func summarise(s []sample, p int) phaseStats { return summariseOf(s, p, loadsOf) }

// summariseOf is summarise for the loads that pick selects.
func summariseOf(s []sample, p int, pick func(sample) []float64) phaseStats {
	var idx []int
	for i := range s {
		if s[i].Phase == p {
			idx = append(idx, i)
		}
	}
	idx = idx[len(idx)/2:]
	if len(idx) == 0 {
		return phaseStats{Median: math.NaN(), Mean: math.NaN()}
	}
	from, to := s[idx[0]].T, s[idx[len(idx)-1]].T
	var vals []float64
	for _, i := range idx {
		if v := imbalanceOf(s, i, pick); !math.IsNaN(v) {
			vals = append(vals, v)
		}
	}
	if len(vals) == 0 {
		return phaseStats{Median: math.NaN(), Mean: math.NaN(), From: from, To: to}
	}
	slices.Sort(vals)
	sum := 0.0
	for _, v := range vals {
		sum += v
	}
	med := vals[len(vals)/2]
	if len(vals)%2 == 0 {
		med = (med + vals[len(vals)/2-1]) / 2
	}
	return phaseStats{Seconds: len(vals), Median: med, Mean: sum / float64(len(vals)), From: from, To: to}
}
