package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/haproxy-weighter/haproxy-weighter/cmd/internal/cli"
	"github.com/haproxy-weighter/haproxy-weighter/internal/readlimit"
	"github.com/haproxy-weighter/haproxy-weighter/sim"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// simulateFlags are the knobs of haproxy-weighter-sim beyond the scenario file.
type simulateFlags struct {
	scenario, output, plot string
	sweep, perConn         bool
	quick                  bool   // the default scenario alone, without the worlds
	fresh                  bool   // the fresh-data comparison over --world's scenarios (default all)
	pipelines, external    string // fresh-data model: pipelines to run, external metric
	seeds, top             int
	sc                     sim.Scenario
	policy                 weighter.Policy
	shed, shedSweep        bool                // the shedding comparison and sweep over sim.ShedScenarios
	shedPolicy             weighter.ShedPolicy // the factors of the "… shed" pipeline
	world                  string              // the world comparison: production, lab or all
	pin                    bool                // the pin comparison over --world's scenarios (default all)
}

func newSimulateFlags() *simulateFlags {
	return &simulateFlags{sc: sim.DefaultScenario(), policy: weighter.DefaultPolicy(), shedPolicy: weighter.DefaultShed()}
}

func addSimulateFlags(fl *pflag.FlagSet, f *simulateFlags) {
	fl.StringVar(&f.scenario, "scenario", "", "scenario YAML file (see examples/scenarios)")
	fl.StringVarP(&f.output, "output", "o", "table", "output format: table or json")
	fl.StringVar(&f.plot, "plot", "", "write per-server load over time per strategy to this .svg or .png file")
	fl.BoolVar(&f.sweep, "sweep", false, "sweep policies over the default, sigma-1.0 and 16-server scenarios (scenario flags apply to all three); print Markdown")
	fl.IntVar(&f.seeds, "seeds", 2, "seeds per scenario of a comparison: the worlds the run without flags prints, --world, --fresh, --shed, --sweep")
	fl.IntVar(&f.top, "top", 25, "sweep: rows to print")
	fl.BoolVar(&f.perConn, "per-conn", false, "custom row: feed the weighter load per open connection")
	fl.StringVar(&f.pipelines, "pipelines", "", "run the fresh-data model (balancers, server costs, background, fast signals calibrated by the external metric) with these pipelines, comma-separated, or all")
	fl.BoolVar(&f.quick, "quick", false, "the default scenario alone, every row (~1 s), without the comparison of the lab and production worlds the run without flags prints after it")
	fl.BoolVar(&f.fresh, "fresh", false, "compare the shipped daemon (*) and --pipelines (default all) over the lab and production worlds' twelve scenarios (--world lab or production: one world; --scenario: that one) with --seeds seeds; print Markdown (docs/research/fresh-by-default.md; minutes: --world lab is the quick one)")
	fl.StringVar(&f.external, "external", "", "external metric of the fresh-data model: prometheus-15s-30s, prometheus-15s-1m, graphite-10s-delay-20s, graphite-10s-delay-30s or graphite-60s-delay-60s (sets resolution, rate window and delay)")
	fl.StringVar(&f.world, "world", "", "compare leastconn, the oracle, the shipped daemon (*) and the shipped daemon with shedding over a world's scenarios with --seeds seeds: production (long-lived, burst-6m, burst, restart, drift, many), lab (the six fresh-data scenarios) or all (what the run without flags prints after the default scenario); --pipelines adds rows; with --shed-sweep, the shipped daemon with each point of a grid of shed factors (production: over long-lived, burst and drift); with --fresh, the scenarios it compares over; print Markdown, or JSON with -o json (docs/research/production-world.md)")
	fl.BoolVar(&f.pin, "pin", false, "compare leastconn, the oracle, the shipped daemon (*) without and with shedding and pinning heavy clients (+ pin, + pin + shed) over --world's scenarios (default all) or --scenario alone with --seeds seeds, then the carbon scenario's max/mean over time; print Markdown, or the world's JSON with -o json (docs/research/pinning-simulator.md)")
	addScenarioFlags(fl, &f.sc)
	addPolicyFlags(fl, &f.policy)
	addShedFlags(fl, f)
}

func addScenarioFlags(fl *pflag.FlagSet, sc *sim.Scenario) {
	fl.Uint64Var(&sc.Seed, "seed", sc.Seed, "random seed")
	fl.DurationVar(&sc.Duration, "duration", sc.Duration, "simulated time")
	fl.IntVar(&sc.Servers, "servers", sc.Servers, "backend servers")
	fl.IntVar(&sc.Connections, "connections", sc.Connections, "open connections kept on average")
	fl.Float64Var(&sc.Rate.Median, "median", sc.Rate.Median, "lognormal median rate per connection (datapoints/s)")
	fl.Float64Var(&sc.Rate.Sigma, "sigma", sc.Rate.Sigma, "lognormal sigma")
	fl.Float64Var(&sc.Rate.Cap, "cap", sc.Rate.Cap, "largest rate of one connection")
	fl.DurationVar(&sc.MeanLife, "life", sc.MeanLife, "mean connection lifetime")
	fl.DurationVar(&sc.Resolution, "resolution", sc.Resolution, "scrape interval / metric resolution")
	fl.DurationVar(&sc.RateWindow, "rate-window", sc.RateWindow, "window of the rate the weighter sees")
	fl.DurationVar(&sc.Interval, "interval", sc.Interval, "weighter interval")
	fl.DurationVar(&sc.Delay, "delay", sc.Delay, "ingestion delay before a metric point is visible to the weighter")
	fl.StringVar(&sc.FastSignal, "fast-signal", sc.FastSignal, "fresh-data model: fast signal read every cycle: live (show sess all), contstats or closed (show stat)")
	fl.BoolVar(&sc.Returning, "returning", sc.Returning, "every client comes back from the same address when its connection ends (after 0.1-2 s, for a new lifetime), and no other client arrives: what makes a pin find a heavy client again")
}

func addPolicyFlags(fl *pflag.FlagSet, p *weighter.Policy) {
	fl.StringVar(&p.Function, "function", p.Function, "custom row: weighting function")
	fl.Float64Var(&p.LimitingFactor, "limiting-factor", p.LimitingFactor, "custom row: limiting factor")
	fl.Float64Var(&p.Aggressiveness, "aggressiveness", p.Aggressiveness, "custom row: aggressiveness")
	fl.Float64Var(&p.Gain, "gain", p.Gain, "custom row: feedback gain")
	fl.IntVar(&p.Deadband, "deadband", p.Deadband, "custom row: deadband")
	fl.Float64Var(&p.MaxStep, "max-step", p.MaxStep, "custom row: max step")
	fl.Float64Var(&p.MaxRun, "max-run", p.MaxRun, "custom row: the run bound (most new connections in a row on one server, less one; 0 = off)")
	fl.DurationVar((*time.Duration)(&p.Smoothing), "smoothing", time.Duration(p.Smoothing), "custom row: smoothing half-life")
}

func runSimulate(cmd *cobra.Command, f *simulateFlags) error {
	out := cmd.OutOrStdout()
	if f.output != "table" && f.output != "json" {
		return cli.Usage(fmt.Errorf("unknown --output %q (want table or json)", f.output))
	}
	if f.pin {
		return runPin(cmd, f)
	}
	if f.world != "" && !f.fresh {
		return runWorld(cmd, f)
	}
	if f.shed || f.shedSweep {
		return runShed(cmd, f)
	}
	if f.fresh || f.pipelines != "" {
		return runFresh(cmd, f)
	}
	if f.sweep {
		scenarios := sim.GoalScenarios() // pipeline and traffic flags apply to every goal scenario
		applyScenarioFlags(cmd.Flags(), f, nil, scenarios)
		res, err := sim.Sweep(scenarios, sim.Seeds(f.seeds), sim.DefaultGrid())
		if err != nil {
			return err
		}
		return res.WriteMarkdown(out, f.top)
	}
	sc, err := scenarioFromFlags(cmd.Flags(), f, nil)
	if err != nil {
		return err
	}
	strategies := sim.DefaultStrategies()
	if f.policy != weighter.DefaultPolicy() { // the default policy has its rows already
		if err := f.policy.Validate(); err != nil { // only flags make this policy
			return policyFlagsError(cmd.Flags(), err)
		}
		custom := sim.WeighterStrategy(f.policy)
		if f.perConn {
			custom = sim.PerConnStrategy(f.policy)
		}
		custom.Name = "custom: " + custom.Name
		strategies = append(strategies, custom)
	}
	world, err := overviewPlan(cmd.Flags(), f)
	if err != nil {
		return err
	}
	rep, err := sim.RunDefault(sc, strategies)
	if err != nil {
		return err
	}
	return writeOverview(cmd, f, rep, world)
}

// writeReport writes rep's --plot, when asked, and rep itself in --output's format.
func writeReport(rep *sim.Report, f *simulateFlags, out io.Writer) error {
	if err := writePlot(rep, f); err != nil {
		return err
	}
	if f.output == "json" {
		return rep.WriteJSON(out)
	}
	return rep.WriteTable(out)
}

// writePlot writes rep's --plot, when asked.
func writePlot(rep *sim.Report, f *simulateFlags) error {
	if f.plot == "" {
		return nil
	}
	return rep.WritePlot(f.plot)
}

// usageHint is the line the table ends with on stderr: a newcomer should
// learn what else there is, and how to get the one scenario quickly.
const usageHint = "haproxy-weighter-sim --help lists the flags; --quick (the default scenario alone, ~1 s), --scenario FILE (examples/scenarios/), --world production --seeds 4, --fresh (every candidate pipeline over both worlds), --shed, --output json"

// scenarioFromFlags loads --scenario (or the default), applies ext (the
// --external metric, if any) and the flags the user set, and validates it.
func scenarioFromFlags(fl *pflag.FlagSet, f *simulateFlags, ext *sim.External) (sim.Scenario, error) {
	scenarios, err := scenariosOr(f, []sim.Scenario{sim.DefaultScenario()})
	if err != nil {
		return sim.Scenario{}, err
	}
	applyScenarioFlags(fl, f, ext, scenarios)
	return scenarios[0], scenarios[0].Validate()
}

// scenariosOr returns the --scenario file alone, when given, else defaults.
func scenariosOr(f *simulateFlags, defaults []sim.Scenario) ([]sim.Scenario, error) {
	if f.scenario == "" {
		return defaults, nil
	}
	sc, err := loadScenarioFile(f.scenario)
	if err != nil {
		return nil, err
	}
	return []sim.Scenario{sc}, nil
}

// applyScenarioFlags applies ext (the --external metric, if any) and then the
// scenario flags the user set to every scenario.
func applyScenarioFlags(fl *pflag.FlagSet, f *simulateFlags, ext *sim.External, scenarios []sim.Scenario) {
	for i := range scenarios {
		if ext != nil {
			ext.Apply(&scenarios[i])
		}
		fl.Visit(func(flag *pflag.Flag) { sim.Override(&scenarios[i], f.sc, flag.Name) })
	}
}

// externalFromFlags returns the --external metric, or nil when not given.
func externalFromFlags(f *simulateFlags) (*sim.External, error) {
	if f.external == "" {
		return nil, nil
	}
	e, err := sim.ExternalNamed(f.external)
	if err != nil {
		return nil, cli.Usage(fmt.Errorf("--external: %w", err))
	}
	return &e, nil
}

// policyFlagsError rewrites the problems of a policy made from the flags in
// terms of the flags (cli.PolicyError), as a usage error (exit 2).
func policyFlagsError(fs *pflag.FlagSet, err error) error {
	return cli.Usage(cli.PolicyError(fs, err))
}

// runFresh runs the fresh-data model, the shipped daemon starred
// (sim.StarShipped): one scenario with --pipelines, or with --fresh the
// comparison over --world's scenarios (all: the lab's and the production's).
func runFresh(cmd *cobra.Command, f *simulateFlags) error {
	list := f.pipelines
	if list == "" {
		list = "all"
	}
	pipelines, err := sim.SelectPipelines(list)
	if err != nil {
		return cli.Usage(fmt.Errorf("--pipelines: %w", err))
	}
	pipelines = sim.StarShipped(pipelines)
	if err := applyShedFlags(cmd.Flags(), f, pipelines); err != nil {
		return err
	}
	ext, err := externalFromFlags(f)
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if f.fresh {
		defaults, err := freshScenarios(f.world)
		if err != nil {
			return err
		}
		scenarios, err := scenariosOr(f, defaults)
		if err != nil {
			return err
		}
		applyScenarioFlags(cmd.Flags(), f, ext, scenarios)
		res, err := sim.CompareFresh(scenarios, sim.Seeds(f.seeds), pipelines)
		if err != nil {
			return err
		}
		return res.WriteMarkdown(out)
	}
	sc, err := scenarioFromFlags(cmd.Flags(), f, ext)
	if err != nil {
		return err
	}
	rep, err := sim.RunFleet(sc, pipelines)
	if err != nil {
		return err
	}
	return writeReport(rep, f, out)
}

// freshScenarios are the scenarios --fresh compares over: --world's, all
// when not given.
func freshScenarios(world string) ([]sim.Scenario, error) {
	if world == "" {
		world = sim.WorldAll
	}
	scenarios, err := sim.WorldScenarios(world)
	if err != nil {
		return nil, cli.Usage(fmt.Errorf("--world: %w", err))
	}
	return scenarios, nil
}

// loadScenarioFile reads and parses a scenario file, bounded in size.
func loadScenarioFile(path string) (sim.Scenario, error) {
	data, err := readlimit.ReadFile(path, 1<<20)
	if err != nil {
		return sim.Scenario{}, fmt.Errorf("read scenario: %w", err)
	}
	sc, err := sim.ParseScenario(data)
	if err != nil {
		return sim.Scenario{}, fmt.Errorf("%s: %w", path, err)
	}
	return sc, nil
}
