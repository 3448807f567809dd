package main

import (
	"fmt"
	"math"
)

// report prints the before/after summary and writes the picture.
func (d *demo) report() error {
	before, after := summarise(d.samples, 1), summarise(d.samples, 2)
	cBefore, cAfter := summariseOf(d.samples, 1, controlOf), summariseOf(d.samples, 2, controlOf)
	fmt.Printf("\n== summary: max/mean load, median over the second half of each phase (1.00 = perfectly even)\n")
	fmt.Printf("                             weighted HAProxy   control HAProxy (same traffic, never weighted)\n")
	fmt.Printf("   phase 1, no weighting:    %-18s %s\n", fmtRatio(before.Median), fmtRatio(cBefore.Median))
	fmt.Printf("   phase 2, weighting on:    %-18s %s\n", fmtRatio(after.Median), fmtRatio(cAfter.Median))
	fmt.Printf("   (windows: %s-%s and %s-%s)\n", fmtSecs(before.From), fmtSecs(before.To), fmtSecs(after.From), fmtSecs(after.To))
	if !math.IsNaN(before.Median) && !math.IsNaN(after.Median) && !math.IsNaN(cAfter.Median) {
		fmt.Printf("   the busiest server carried %.0f%% more than the mean before weighting, %.0f%% with it\n"+
			"   (%.0f%% at the same time on the control HAProxy)\n",
			100*(before.Median-1), 100*(after.Median-1), 100*(cAfter.Median-1))
	}
	late := 0
	for _, s := range d.samples {
		if s.Late {
			late++
		}
	}
	if late > len(d.samples)/20 {
		fmt.Printf("   note: %d of %d one-second samples came late: the machine is busy (other jobs?),\n"+
			"   which also slows the traffic generator; expect noisier numbers\n", late, len(d.samples))
	}
	if d.o.Out == "" {
		return nil
	}
	names := make([]string, len(d.sinks))
	for i, s := range d.sinks {
		names[i] = s.Name
	}
	if err := writePlot(d.o.Out, d.samples, names, d.o.Phase1.Seconds(), [2]phaseStats{before, after}); err != nil {
		return err
	}
	fmt.Printf("   picture: %s\n", d.o.Out)
	return nil
}
