package main

import (
	"fmt"
	"math"
)

// report prints the before/after summary and writes the picture.
func (d *demo) report() error {
	before, after := summarise(d.samples, 1), summarise(d.samples, 2)
	fmt.Printf("\n== summary: max/mean load over the second half of each phase (1.00 = perfectly even)\n")
	fmt.Printf("   without weighting: median %s  mean %s  (%d s)\n", fmtRatio(before.Median), fmtRatio(before.Mean), before.Seconds)
	fmt.Printf("   with weighting:    median %s  mean %s  (%d s)\n", fmtRatio(after.Median), fmtRatio(after.Mean), after.Seconds)
	if !math.IsNaN(before.Median) && !math.IsNaN(after.Median) {
		fmt.Printf("   the busiest server carried %.0f%% more than the mean before, %.0f%% after\n",
			100*(before.Median-1), 100*(after.Median-1))
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
		names[i] = s.name
	}
	if err := writePlot(d.o.Out, d.samples, names, d.o.Phase1.Seconds(), [2]phaseStats{before, after}); err != nil {
		return err
	}
	fmt.Printf("   picture: %s\n", d.o.Out)
	return nil
}
