package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/haproxy-weighter/haproxy-weighter/cmd/internal/cli"
	"github.com/haproxy-weighter/haproxy-weighter/sim"
)

// addShedFlags adds the session-shedding flags (docs/shedding.md).
func addShedFlags(fl *pflag.FlagSet, f *simulateFlags) {
	fl.BoolVar(&f.shed, "shed", false, "compare leastconn, agent-check, oracle and the recommended pipeline without and with session shedding (and the references: shedding unbounded, an omniscient shedder at 6 sheds per hour per server on the oracle's and the recommended placement) over the three goal scenarios and a whale scenario (or --scenario alone) with --seeds seeds; print Markdown, or JSON with -o json (docs/shedding.md)")
	fl.BoolVar(&f.shedSweep, "shed-sweep", false, "as --shed, with one shedding row per point of a grid of shed factors and the omniscient shedder at 6-96 sheds per hour per server, ranked by the goals met; print Markdown, or JSON with -o json")
	p := &f.shedPolicy
	fl.Float64Var(&p.Above, "shed-above", p.Above, "shedding: a server is hot above this × the mean load")
	fl.IntVar(&p.For, "shed-for", p.For, "shedding: cycles a server must stay hot")
	fl.IntVar(&p.MaxPerMinute, "shed-max-per-minute", p.MaxPerMinute, "shedding: most sessions closed per backend within any minute")
	fl.Float64Var(&p.MaxShare, "shed-max-share", p.MaxShare, "shedding: largest share of the backend's sessions closed per cycle")
	fl.DurationVar((*time.Duration)(&p.MinAge), "shed-min-age", time.Duration(p.MinAge), "shedding: never close a session younger than this")
	fl.DurationVar((*time.Duration)(&p.Cooldown), "shed-cooldown", time.Duration(p.Cooldown), "shedding: never close a session of the same client address again within this")
	fl.Float64Var(&p.Progress, "shed-progress", p.Progress, "shedding: wait while the hot server's excess over the mean shrank by at least this share over the last --shed-for cycles")
}

// applyShedFlags gives the shedding pipelines the --shed-* factors, when any is set.
func applyShedFlags(fl *pflag.FlagSet, f *simulateFlags, pipelines []sim.Pipeline) error {
	set := false
	fl.Visit(func(flag *pflag.Flag) {
		set = set || strings.HasPrefix(flag.Name, "shed-") && flag.Name != "shed-sweep"
	})
	if !set {
		return nil
	}
	if err := f.shedPolicy.Validate(); err != nil {
		return cli.Usage(fmt.Errorf("shed factors: %w", err))
	}
	for i := range pipelines {
		if pipelines[i].Shed != nil {
			p := f.shedPolicy
			pipelines[i].Shed = &p
		}
	}
	return nil
}

// runShed runs the shedding comparison (--shed) or sweep (--shed-sweep) over
// sim.ShedScenarios, or --scenario alone.
func runShed(cmd *cobra.Command, f *simulateFlags) error {
	scenarios, err := scenariosOr(f, sim.ShedScenarios())
	if err != nil {
		return err
	}
	ext, err := externalFromFlags(f)
	if err != nil {
		return err
	}
	applyScenarioFlags(cmd.Flags(), f, ext, scenarios)
	pipelines := sim.ShedComparison()
	if err := applyShedFlags(cmd.Flags(), f, pipelines[:len(sim.FleetBaselines())+2]); err != nil {
		return err
	}
	if f.shedSweep {
		pipelines = sim.ShedSweepPipelines()
	}
	res, err := sim.CompareShed(scenarios, sim.Seeds(f.seeds), pipelines)
	if err != nil {
		return err
	}
	switch {
	case f.output == "json":
		return res.WriteJSON(cmd.OutOrStdout())
	case f.shedSweep:
		return res.WriteSweep(cmd.OutOrStdout(), f.top)
	}
	return res.WriteMarkdown(cmd.OutOrStdout())
}
