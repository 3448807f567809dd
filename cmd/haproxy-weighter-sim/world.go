package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/haproxy-weighter/haproxy-weighter/cmd/internal/cli"
	"github.com/haproxy-weighter/haproxy-weighter/sim"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// worldPlan is a world comparison to run: the world's name, its scenarios,
// the pipelines side by side and the seeds.
type worldPlan struct {
	name      string
	scenarios []sim.Scenario
	pipelines []sim.Pipeline
	seeds     []uint64
}

func (p *worldPlan) run() (*sim.ShedResult, error) {
	return sim.CompareShed(p.scenarios, p.seeds, p.pipelines)
}

// runWorld compares the production world's arms (sim.ProductionArms, with
// the --shed-* factors on the shedding arm, and the --pipelines named) over
// the --world's scenarios, or --scenario alone.
func runWorld(cmd *cobra.Command, f *simulateFlags) error {
	plan, err := worldPlanFromFlags(cmd.Flags(), f)
	if err != nil {
		return err
	}
	res, err := plan.run()
	if err != nil {
		return err
	}
	if f.output == "json" {
		return res.WriteWorldJSON(cmd.OutOrStdout(), plan.name)
	}
	return res.WriteWorld(cmd.OutOrStdout())
}

// worldPlanFromFlags is the comparison --world asks for.
func worldPlanFromFlags(fl *pflag.FlagSet, f *simulateFlags) (*worldPlan, error) {
	defaults, err := sim.WorldScenarios(f.world)
	if err != nil {
		return nil, cli.Usage(fmt.Errorf("--world: %w", err))
	}
	scenarios, err := scenariosOr(f, defaults)
	if err != nil {
		return nil, err
	}
	ext, err := externalFromFlags(f)
	if err != nil {
		return nil, err
	}
	applyScenarioFlags(fl, f, ext, scenarios)
	pipelines := sim.ProductionArms()
	if f.pin {
		pipelines = sim.PinArms()
	}
	if f.shedSweep {
		pipelines = sim.WorldShedSweep()
		if f.scenario == "" && f.world == sim.WorldProduction {
			scenarios = sim.WorldShedGoalScenarios()
			applyScenarioFlags(fl, f, ext, scenarios)
		}
	}
	if f.pipelines != "" {
		more, err := sim.SelectWorldPipelines(f.pipelines)
		if err != nil {
			return nil, cli.Usage(fmt.Errorf("--pipelines: %w", err))
		}
		pipelines = append(pipelines, more...)
	}
	if err := applyShedFlags(fl, f, pipelines); err != nil {
		return nil, err
	}
	return &worldPlan{name: f.world, scenarios: scenarios, pipelines: pipelines, seeds: sim.Seeds(f.seeds)}, nil
}

// overviewPlan is the world comparison the run without flags prints after
// the default scenario: sim.OverviewWorld (the lab's scenarios and the
// production's) with sim.ProductionArms, the --shed-* factors on the
// shedding arm, with --seeds seeds. nil when the run is one scenario's
// (oneScenario): the worlds' scenarios are not shaped by its flags.
func overviewPlan(fl *pflag.FlagSet, f *simulateFlags) (*worldPlan, error) {
	if oneScenario(fl, f) {
		return nil, nil
	}
	scenarios, err := sim.WorldScenarios(sim.OverviewWorld)
	if err != nil {
		return nil, err
	}
	pipelines := sim.ProductionArms()
	if err := applyShedFlags(fl, f, pipelines); err != nil {
		return nil, err
	}
	return &worldPlan{name: sim.OverviewWorld, scenarios: scenarios, pipelines: pipelines, seeds: sim.Seeds(f.seeds)}, nil
}

// oneScenario says whether the run is about one scenario alone: --quick,
// --scenario, or a flag that shapes the scenario or the custom row.
func oneScenario(fl *pflag.FlagSet, f *simulateFlags) bool {
	shaping := oneScenarioFlags()
	one := f.quick
	fl.Visit(func(flag *pflag.Flag) { one = one || shaping[flag.Name] })
	return one
}

// oneScenarioFlags are the names of the flags that shape one scenario or
// its custom row, taken from the functions that define them.
func oneScenarioFlags() map[string]bool {
	scratch := pflag.NewFlagSet("one-scenario", pflag.ContinueOnError)
	addScenarioFlags(scratch, &sim.Scenario{})
	addPolicyFlags(scratch, &weighter.Policy{})
	out := map[string]bool{"scenario": true, "per-conn": true}
	scratch.VisitAll(func(flag *pflag.Flag) { out[flag.Name] = true })
	return out
}

// worldHeading introduces, in the table, the world comparison the run
// without flags prints after the default scenario.
const worldHeading = `
The lab and the production worlds (--world %s): %d scenarios, %d seeds (--seeds), means over the seeds;
p50 / p90 of max/mean over 10 s windows after the warmup (gap: share of the leastconn→oracle gap closed,
p50); * = the daemon as it ships, + shed = the same with shedding at weighter.DefaultShed (the --shed-*
flags change it); --quick leaves this out (docs/research/production-world.md)

`

// writeOverview writes the default scenario's report (and its --plot) and,
// when world is not nil, the world comparison after it.
func writeOverview(cmd *cobra.Command, f *simulateFlags, rep *sim.Report, world *worldPlan) error {
	out := cmd.OutOrStdout()
	if f.output == "json" {
		if world == nil {
			return writeReport(rep, f, out)
		}
		return writeOverviewJSON(rep, f, world, out)
	}
	if err := writeReport(rep, f, out); err != nil {
		return err
	}
	if world != nil {
		if err := writeWorldTable(cmd, world); err != nil {
			return err
		}
	}
	cmd.PrintErrln(usageHint)
	return nil
}

// writeOverviewJSON writes one object: the report's keys and the world
// comparison under "world".
func writeOverviewJSON(rep *sim.Report, f *simulateFlags, world *worldPlan, out io.Writer) error {
	if err := writePlot(rep, f); err != nil {
		return err
	}
	res, err := world.run()
	if err != nil {
		return err
	}
	return rep.WriteJSONWithWorld(out, res, world.name)
}

// writeWorldTable runs the world comparison and writes it under its heading,
// saying on stderr first what it runs: the report above is already out, and
// the worlds take a while.
func writeWorldTable(cmd *cobra.Command, world *worldPlan) error {
	cmd.PrintErrf("comparing the lab and production worlds: %d scenarios × %d seeds (under a minute on 2 cores at 2 seeds; --quick leaves them out)\n",
		len(world.scenarios), len(world.seeds))
	res, err := world.run()
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if _, err := fmt.Fprintf(out, worldHeading, world.name, len(world.scenarios), len(world.seeds)); err != nil {
		return err
	}
	return res.WriteWorld(out)
}
