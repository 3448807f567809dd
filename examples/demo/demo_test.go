package main

import (
	"math"
	"os"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	b, err := os.ReadFile("testdata/show-stat.csv") // captured from HAProxy 2.6 during a demo
	if err != nil {
		t.Fatal(err)
	}
	st, err := parseStat(string(b))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]serverStat{"s1": {Weight: 256, Conns: 32}, "s2": {Weight: 195, Conns: 28}}
	if len(st) != len(want) || st["s1"] != want["s1"] || st["s2"] != want["s2"] {
		t.Errorf("parseStat = %v, want %v (no FRONTEND/BACKEND rows)", st, want)
	}
	if _, err := parseStat("Unknown command\n"); err == nil {
		t.Error("parseStat accepted a reply without the stat columns")
	}
}

func TestMaxOverMean(t *testing.T) {
	if got := maxOverMean([]float64{10, 20, 30, 40}); got != 1.6 {
		t.Errorf("maxOverMean = %v, want 1.6", got)
	}
	if got := maxOverMean([]float64{0, 0}); !math.IsNaN(got) {
		t.Errorf("maxOverMean of no load = %v, want NaN", got)
	}
}

// samplesOf builds one sample per second: loads[i] is second i's loads.
func samplesOf(phase1 int, loads ...[]float64) []sample {
	s := make([]sample, len(loads))
	for i, l := range loads {
		p := 1
		if i >= phase1 {
			p = 2
		}
		s[i] = sample{T: time.Duration(i) * time.Second, Phase: p, Loads: l}
	}
	return s
}

func TestSmoothedStaysInPhase(t *testing.T) {
	s := samplesOf(2, []float64{10, 30}, []float64{30, 10}, []float64{20, 20})
	if got := smoothed(s, 1); got[0] != 20 || got[1] != 20 {
		t.Errorf("smoothed over phase 1 = %v, want [20 20]", got)
	}
	if got := smoothed(s, 2); got[0] != 20 || got[1] != 20 {
		t.Errorf("first second of phase 2 must not average phase 1: %v", got)
	}
}

func TestSummariseSecondHalf(t *testing.T) {
	// Phase 1: a first half at 2.5 (ignored) and a second half at 1.5; phase 2 steady 1.2.
	var loads [][]float64
	for i := range 60 {
		switch {
		case i < 20:
			loads = append(loads, []float64{5, 1, 1, 1}) // 2.5
		case i < 40:
			loads = append(loads, []float64{3, 1, 1, 3}) // 1.5
		default:
			loads = append(loads, []float64{1.2, 0.8, 1, 1}) // 1.2
		}
	}
	s := samplesOf(40, loads...)
	// Windows of smoothWindow (10) seconds mix the two halves for seconds 20-28, all
	// above 1.5: phase 1's second half (seconds 20-39) still has a median of 1.5.
	if got := summarise(s, 1); math.Abs(got.Median-1.5) > 1e-9 || got.Seconds != 20 {
		t.Errorf("phase 1 = %+v, want median 1.5 over 20 s", got)
	}
	if got := summarise(s, 2); math.Abs(got.Median-1.2) > 1e-9 || math.Abs(got.Mean-1.2) > 1e-9 {
		t.Errorf("phase 2 = %+v, want 1.2", got)
	}
}
