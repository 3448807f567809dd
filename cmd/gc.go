package cmd

import (
	"os"
	"runtime/debug"
)

// runGCPercent is the garbage collector's target for `run` when GOGC is not
// set: the heap may grow to 1.5× what is live instead of Go's 2×. The
// daemon's live heap is small and steady (about 10 MB at 1,000 servers with
// 2,000 connections) and most of what it allocates is each cycle's work, so
// the default's headroom was a third of its RSS: at 1,000 servers every 1 s
// with 2,000 connections, 36.6-42.9 MB against 32.3-35.7 MB at 50, for 1.3
// points more of a core (docs/benchmarks.md, "Soak").
const runGCPercent = 50

// setRunGC applies runGCPercent unless the operator chose with GOGC.
func setRunGC() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(runGCPercent)
	}
}
