package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/haproxy-weighter/haproxy-weighter/sim"
)

// runWorld compares the production world's arms (sim.ProductionArms, with
// the --shed-* factors on the shedding arm, and the --pipelines named) over
// the --world's scenarios, or --scenario alone.
func runWorld(cmd *cobra.Command, f *simulateFlags) error {
	defaults, err := sim.WorldScenarios(f.world)
	if err != nil {
		return usageError{fmt.Errorf("--world: %w", err)}
	}
	scenarios, err := scenariosOr(f, defaults)
	if err != nil {
		return err
	}
	ext, err := externalFromFlags(f)
	if err != nil {
		return err
	}
	applyScenarioFlags(cmd.Flags(), f, ext, scenarios)
	pipelines := sim.ProductionArms()
	if f.shedSweep {
		pipelines = sim.WorldShedSweep()
		if f.scenario == "" && f.world == sim.WorldProduction {
			scenarios = sim.WorldShedGoalScenarios()
			applyScenarioFlags(cmd.Flags(), f, ext, scenarios)
		}
	}
	if f.pipelines != "" {
		more, err := sim.SelectWorldPipelines(f.pipelines)
		if err != nil {
			return usageError{fmt.Errorf("--pipelines: %w", err)}
		}
		pipelines = append(pipelines, more...)
	}
	if err := applyShedFlags(cmd.Flags(), f, pipelines); err != nil {
		return err
	}
	res, err := sim.CompareShed(scenarios, sim.Seeds(f.seeds), pipelines)
	if err != nil {
		return err
	}
	if f.output == "json" {
		return res.WriteJSON(cmd.OutOrStdout())
	}
	return res.WriteWorld(cmd.OutOrStdout())
}
