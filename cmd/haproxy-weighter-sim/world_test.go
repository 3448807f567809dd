package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/sim"
)

// parsed returns the flags of a command line, parsed as the root command does.
func parsed(t *testing.T, args ...string) (*pflag.FlagSet, *simulateFlags) {
	t.Helper()
	f := newSimulateFlags()
	fl := pflag.NewFlagSet("haproxy-weighter-sim", pflag.ContinueOnError)
	addSimulateFlags(fl, f)
	require.NoError(t, fl.Parse(args))
	return fl, f
}

func scenarioNames(scenarios []sim.Scenario) []string {
	var out []string
	for _, sc := range scenarios {
		out = append(out, strings.TrimPrefix(sc.Name, "fresh-"))
	}
	return out
}

// labAndProduction are the names of the twelve scenarios of the two worlds.
var labAndProduction = []string{"heterogeneous", "background", "three-balancers", "default", "sigma-1.0", "16-servers-60s",
	"long-lived", "burst-6m", "burst", "restart", "drift", "many"}

// The run without flags (table or JSON) compares the lab's and the
// production world's scenarios after the default one, in full, with the
// shipped daemon starred; before, it ran the default scenario alone.
func TestBareRunComparesBothWorlds(t *testing.T) {
	for _, args := range [][]string{nil, {"-o", "json"}, {"--seeds", "4"}, {"--plot", "x.svg"}} {
		fl, f := parsed(t, args...)
		plan, err := overviewPlan(fl, f)
		require.NoError(t, err)
		require.NotNil(t, plan, "%q compares the worlds", args)
		assert.Equal(t, sim.WorldAll, plan.name)
		assert.Equal(t, labAndProduction, scenarioNames(plan.scenarios))
		full, err := sim.WorldScenarios(sim.WorldAll)
		require.NoError(t, err)
		assert.Equal(t, full, plan.scenarios, "no scenario is shortened")
		var names []string
		var starred []sim.Pipeline
		for _, p := range plan.pipelines {
			names = append(names, p.Name)
			if p.Default {
				starred = append(starred, p)
			}
		}
		assert.Equal(t, []string{"leastconn", "oracle", sim.ShippedName, sim.ShippedShedName}, names)
		assert.Equal(t, []sim.Pipeline{sim.ShippedPipeline()}, starred, "the row starred is the daemon as it ships")
		assert.Equal(t, sim.Seeds(f.seeds), plan.seeds)
	}
}

// A run about one scenario leaves the worlds out: their scenarios are not
// shaped by its flags.
func TestOneScenarioRunsLeaveTheWorldsOut(t *testing.T) {
	for _, args := range [][]string{
		{"--quick"}, {"--quick", "-o", "json"}, {"--scenario", "x.yaml"}, {"--duration", "8m"}, {"--seed", "3"},
		{"--servers", "16"}, {"--fast-signal", "closed"}, {"--function", "feedback"}, {"--max-run", "0"}, {"--per-conn"},
	} {
		fl, f := parsed(t, args...)
		plan, err := overviewPlan(fl, f)
		require.NoError(t, err)
		assert.Nil(t, plan, "%q", args)
	}
}

// The --shed-* factors reach the worlds' shedding arm, as with --world.
func TestBareRunShedFactors(t *testing.T) {
	fl, f := parsed(t, "--shed-above", "1.5")
	plan, err := overviewPlan(fl, f)
	require.NoError(t, err)
	require.NotNil(t, plan)
	shed := plan.pipelines[3]
	require.NotNil(t, shed.Shed)
	assert.Equal(t, 1.5, shed.Shed.Above)

	out, stderr, code := run(t, "--shed-above", "1")
	assert.Equal(t, 2, code, stderr)
	assert.Empty(t, out)
	assert.Contains(t, stderr, "error: shed factors: shed.above must be > 1")
}

// shortWorld is the run without flags' plan on two short production
// scenarios, one seed: what the test can afford of its twelve.
func shortWorld(t *testing.T) *worldPlan {
	t.Helper()
	fl, f := parsed(t)
	plan, err := overviewPlan(fl, f)
	require.NoError(t, err)
	require.NotNil(t, plan)
	long := sim.LongLivedScenario()
	long.Duration = long.Warmup + 10*time.Minute
	plan.scenarios, plan.seeds = []sim.Scenario{sim.QuickBurstScenario(), long}, sim.Seeds(1)
	return plan
}

// overview runs what the run without flags runs, its world shortened, and
// returns stdout and stderr.
func overview(t *testing.T, output string, world *worldPlan) (string, string) {
	t.Helper()
	fl, f := parsed(t, "-o", output, "--duration", "8m")
	sc, err := scenarioFromFlags(fl, f, nil)
	require.NoError(t, err)
	rep, err := sim.RunDefault(sc, sim.DefaultStrategies())
	require.NoError(t, err)
	var out, errb bytes.Buffer
	cmd := &cobra.Command{}
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	require.NoError(t, writeOverview(cmd, f, rep, world))
	return out.String(), errb.String()
}

// The JSON of the run without flags is one object: the default scenario's
// report as before, and the world comparison under "world", the shipped
// daemon its only default row.
func TestBareJSONHasTheWorld(t *testing.T) {
	out, stderr := overview(t, "json", shortWorld(t))
	assert.Empty(t, stderr)
	var res struct {
		Scenario   map[string]any `json:"scenario"`
		Strategies []struct {
			Strategy string `json:"strategy"`
			Default  bool   `json:"default"`
		} `json:"strategies"`
		World struct {
			World     string   `json:"world"`
			Seeds     int      `json:"seeds"`
			Scenarios []string `json:"scenarios"`
			Pipelines []struct {
				Name                string `json:"name"`
				Default             bool   `json:"default"`
				NeverAboveLeastconn *bool  `json:"never_above_leastconn"`
				Cells               []struct {
					Scenario string   `json:"scenario"`
					P50      float64  `json:"p50"`
					P90      float64  `json:"p90"`
					Gap      *float64 `json:"gap_closed_p50"`
					PerHour  *float64 `json:"sheds_per_hour_per_server"`
					HerdMean *float64 `json:"herd_mean"`
					HerdMost *float64 `json:"herd_most"`
				} `json:"cells"`
			} `json:"pipelines"`
		} `json:"world"`
	}
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&struct {
		Scenario   json.RawMessage `json:"scenario"`
		Strategies json.RawMessage `json:"strategies"`
		World      json.RawMessage `json:"world"`
	}{}), "one object, three keys")
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	assert.Equal(t, "8m0s", res.Scenario["duration"])
	for _, s := range res.Strategies {
		assert.Equal(t, s.Strategy == sim.ShippedName, s.Default, s.Strategy)
	}
	w := res.World
	assert.Equal(t, sim.WorldAll, w.World)
	assert.Equal(t, 1, w.Seeds)
	assert.Equal(t, []string{"burst-6m", "long-lived"}, w.Scenarios)
	require.Len(t, w.Pipelines, 4)
	for _, p := range w.Pipelines {
		assert.Equal(t, p.Name == sim.ShippedName, p.Default, p.Name)
		assert.Equal(t, p.Name == "leastconn", p.NeverAboveLeastconn == nil, p.Name)
		require.Len(t, p.Cells, 2, p.Name)
		for k, c := range p.Cells {
			assert.Equal(t, w.Scenarios[k], c.Scenario)
			assert.GreaterOrEqual(t, c.P90, c.P50, p.Name)
			assert.Greater(t, c.P50, 1.0, p.Name)
			assert.NotNil(t, c.Gap, p.Name)
			assert.Equal(t, p.Name == sim.ShippedShedName, c.PerHour != nil, p.Name)
		}
		assert.NotNil(t, p.Cells[0].HerdMean, "burst-6m has a burst: %s", p.Name)
		assert.NotNil(t, p.Cells[0].HerdMost, "burst-6m has a burst: %s", p.Name)
		assert.Nil(t, p.Cells[1].HerdMean, "long-lived has none: %s", p.Name)
	}
	assert.Equal(t, 1.0, *w.Pipelines[0].Cells[0].HerdMost, "leastconn spreads the burst")

	out, stderr = overview(t, "json", nil)
	assert.Empty(t, stderr)
	assert.NotContains(t, out, `"world"`, "one scenario's run: the report alone")
}

// The table of the run without flags: the default scenario's report, then
// the worlds under their heading, the shipped daemon starred; on stderr what
// runs, then the hint.
func TestBareTableHasTheWorld(t *testing.T) {
	out, stderr := overview(t, "table", shortWorld(t))
	report, world, ok := strings.Cut(out, "\nThe lab and the production worlds (--world all): 2 scenarios, 1 seeds (--seeds)")
	require.True(t, ok, out)
	assert.Contains(t, report, "* shipped: fast×calibration")
	assert.Contains(t, world, "| p50 / p90 (gap p50) | burst-6m | long-lived | ≤ leastconn everywhere |")
	assert.Contains(t, world, "| **"+sim.ShippedName+"** * |")
	assert.Contains(t, world, "| "+sim.ShippedShedName+" |")
	assert.Contains(t, world, "| heavy clients of one burst on one server (mean / most) | burst-6m |")
	assert.Equal(t, "comparing the lab and production worlds: 2 scenarios × 1 seeds (under a minute on 2 cores at 2 seeds; --quick leaves them out)\n"+usageHint+"\n", stderr)
}

// --world -o json prints the object the run without flags has under "world".
func TestWorldJSONIsTheBareRunsWorld(t *testing.T) {
	out, stderr, code := run(t, "--world", "production", "--scenario", "../../examples/scenarios/production/burst-6m.yaml", "--seeds", "1", "-o", "json")
	require.Equal(t, 0, code, stderr)
	var w struct {
		World     string            `json:"world"`
		Scenarios []string          `json:"scenarios"`
		Pipelines []json.RawMessage `json:"pipelines"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &w))
	assert.Equal(t, sim.WorldProduction, w.World)
	assert.Equal(t, []string{"burst-6m"}, w.Scenarios)
	assert.Len(t, w.Pipelines, 4)
	plan := shortWorld(t)
	plan.name, plan.scenarios = sim.WorldProduction, plan.scenarios[:1]
	bare, _ := overview(t, "json", plan)
	var all struct {
		World json.RawMessage `json:"world"`
	}
	require.NoError(t, json.Unmarshal([]byte(bare), &all))
	var a, b any
	require.NoError(t, json.Unmarshal([]byte(out), &a))
	require.NoError(t, json.Unmarshal(all.World, &b))
	assert.Equal(t, a, b)
}

// --fresh compares over both worlds unless --world names one.
func TestFreshCoversBothWorlds(t *testing.T) {
	all, err := freshScenarios("")
	require.NoError(t, err)
	assert.Equal(t, labAndProduction, scenarioNames(all))
	lab, err := freshScenarios(sim.WorldLab)
	require.NoError(t, err)
	assert.Equal(t, sim.FreshScenarios(), lab)
	prod, err := freshScenarios(sim.WorldProduction)
	require.NoError(t, err)
	assert.Equal(t, sim.ProductionScenarios(), prod)

	out, stderr, code := run(t, "--fresh", "--world", "moon")
	assert.Equal(t, 2, code, stderr)
	assert.Empty(t, out)
	assert.Contains(t, stderr, `error: --world: unknown world "moon"`)
}

// --fresh stars the shipped daemon, whatever --pipelines names.
func TestFreshStarsTheShippedDaemon(t *testing.T) {
	out, stderr, code := run(t, "--fresh", "--world", "production", "--scenario", "../../examples/scenarios/production/burst-6m.yaml",
		"--pipelines", "fast,"+sim.RecommendedPipeline, "--seeds", "1")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "| pipeline | burst-6m | writes/cycle | beats agent everywhere |")
	var rows, bold []string
	for _, line := range strings.Split(out, "\n")[2:] {
		if name, _, ok := strings.Cut(strings.TrimPrefix(line, "| "), " |"); ok {
			rows = append(rows, name)
			if strings.HasPrefix(name, "**") {
				bold = append(bold, name)
			}
		}
	}
	assert.Equal(t, []string{"leastconn", "agent-check", "oracle", "**" + sim.ShippedName + "**", "fast", sim.RecommendedPipeline}, rows)
	assert.Len(t, bold, 1)
}
