package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/haproxy-weighter/haproxy-weighter/sim"
)

// carbonMoments are the moments of the carbon scenario's max/mean the pin
// comparison prints, seconds.
func carbonMoments() []float64 { return []float64{10, 30, 60, 120, 180, 300, 600, 1200, 1800} }

// carbonLimit is the carbon scenario's goal: max/mean at most 2 within a few minutes.
const carbonLimit = 2.0

// runPin runs the pin comparison (--pin): sim.PinArms over --world's
// scenarios (all by default) or --scenario alone with --seeds seeds, then
// the carbon scenario's max/mean over time (or --scenario's, when it lists
// its clients).
func runPin(cmd *cobra.Command, f *simulateFlags) error {
	if f.world == "" {
		f.world = sim.WorldAll
	}
	plan, err := worldPlanFromFlags(cmd.Flags(), f)
	if err != nil {
		return err
	}
	res, err := plan.run()
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if f.output == "json" {
		return res.WriteWorldJSON(out, plan.name)
	}
	if err := res.WritePin(out); err != nil {
		return err
	}
	if _, err := io.WriteString(out, "\n"); err != nil {
		return err
	}
	if err := res.WriteWorld(out); err != nil {
		return err
	}
	sc := sim.CarbonScenario()
	if f.scenario != "" {
		if len(plan.scenarios[0].Clients) == 0 {
			return nil
		}
		sc = plan.scenarios[0] // a scenario of fixed clients: its own series
	}
	s, err := sim.RunSeries(sc, append(plan.pipelines, sim.CarbonShedPipeline()))
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(out, "\nThe %s scenario (seed %d): max/mean of the servers' loads in the 10 s window ending at each moment\n\n", sc.Name, sc.Seed); err != nil {
		return err
	}
	return s.WriteMarkdown(out, carbonMoments(), carbonLimit)
}
