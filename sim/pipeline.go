package sim

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// HAProxy placements besides leastconn (Pipeline.Placement).
const (
	// PlacementRoundrobin is HAProxy's `balance roundrobin` (smooth weighted).
	PlacementRoundrobin = "roundrobin"
	// PlacementRandom2 is HAProxy's `balance random(2)`.
	PlacementRandom2 = "random(2)"
)

// Pipeline inputs: what the weighter is fed each cycle.
const (
	// InputExternal is the external metric alone (plain load), as the README's
	// Prometheus and Graphite examples set it up.
	InputExternal = "external"
	// InputFast is the fast local signal alone: each server's local load per open
	// connection over the fast window.
	InputFast = "fast"
	// InputCalibrated is the fast signal corrected by the external metric
	// (weighter.Calibrator): factor × local / sessions, or (offset + local) / sessions.
	InputCalibrated = "calibrated"
)

// Pipeline is one strategy as the simulator runs it (RunFleet; Run's
// strategies are pipelines too): a baseline (leastconn, roundrobin,
// agent-check, oracle), or a daemon on every balancer with its inputs.
type Pipeline struct {
	Name  string
	Kind  string // KindLeastconn, KindRoundrobin, KindAgent, KindOracle or KindWeighter
	Input string // weighter only
	// PerConn feeds the weighter the external metric per open connection
	// (InputExternal only): weights ∝ connections/load.
	PerConn bool
	Signal  string // fast signal; "" = the scenario's
	// FastWindow is the span of the fast rate and session mean; 0 = the interval.
	FastWindow time.Duration
	// Calibration's mode and factors, when Mode is set ("": the
	// configuration's); its window is always the daemon's, the external
	// query's range (the scenario's rate window).
	Calibration weighter.CalibrationPolicy
	Policy      weighter.Policy
	Default     bool // the pipeline recommended as the shipped default
	// FleetWide makes every daemon add the other balancers' fast signals to
	// its own, as the daemon's `peers:` does (sums of local load and sessions):
	// what several balancers need to act on the servers' whole fresh load, not
	// only their own share of it. A peer's reading is its newest one at least a
	// poll (a quarter interval) old, its rates integrated into the byte counter
	// the calibration takes.
	FleetWide bool
	// LagSessions divides a contstats rate by the sessions open one tick (5 s)
	// earlier, as a connection shows no bytes before its first tick.
	LagSessions bool
	// Shed, when set, makes every daemon close the heaviest long-lived
	// sessions of a hot server (weighter.Shedder); clients reconnect.
	Shed *weighter.ShedPolicy
	// Pin, when set, gives every balancer's HAProxy a stick table matched
	// on the client's address and every daemon a weighter.Pinner with this
	// policy: the daemon pins the heavy clients it learns from its fast
	// reader's clients, and a pinned client's new connections go to its pin.
	Pin *weighter.PinPolicy
	// Omni, when set, adds an omniscient shedder (OmniShed) to the
	// placement: the reference for what shedding could do, not a daemon.
	Omni *OmniShed
	// Interval is the daemon's interval; 0 = the scenario's (or, Shipped,
	// the configuration's default).
	Interval time.Duration
	// SyncExternal answers the external source at once, when asked (research:
	// the hand-made cycle did; the daemon fetches in the background and a
	// cycle takes the newest answer completed before it).
	SyncExternal bool
	// Refresh is how often a calibrating daemon asks the external source
	// while the fast signal is live; 0 = the configuration's default.
	Refresh time.Duration
	// Placement is the balancers' algorithm: "" (leastconn),
	// PlacementRoundrobin or PlacementRandom2 (`balance random(2)`, weighted
	// power of two choices).
	Placement string
	// Adjust, when set, changes the policy the pipeline's daemons run (on
	// top of the shipped one's, for a shipped pipeline): the candidates of
	// the production world are the shipped daemon with one factor changed.
	Adjust func(p *weighter.Policy)
	// Shipped: the daemon as a configuration that sets nothing but its
	// source runs it (interval, calibration, refresh and policy: config's
	// defaults). The pipeline the default run stars.
	Shipped bool
}

func (pl Pipeline) fastWindow(sc Scenario) float64 {
	if pl.FastWindow > 0 {
		return pl.FastWindow.Seconds()
	}
	return pl.interval(sc).Seconds()
}

// FleetBaselines are the strategies every fresh-data comparison includes.
func FleetBaselines() []Pipeline {
	return []Pipeline{
		{Name: "leastconn", Kind: KindLeastconn},
		{Name: "agent-check", Kind: KindAgent},
		{Name: "oracle", Kind: KindOracle},
	}
}

// RecommendedPipeline is the fresh-by-default pipeline: the default policy fed
// the live fast signal per connection, summed over every balancer in front of
// the servers through the daemons' peers (with one balancer, its own: the same
// as fast×ratio), times the
// ratio calibration with weighter.DefaultCalibration (window = the external
// metric's rate window).
const RecommendedPipeline = "fleet×ratio"

// CandidatePipelines are the daemons compared on fresh data, all with
// weighter.DefaultPolicy() under HAProxy leastconn.
func CandidatePipelines() []Pipeline {
	def := weighter.DefaultPolicy()
	cal := func(mode string, half time.Duration) weighter.CalibrationPolicy {
		c := weighter.DefaultCalibration(0)
		c.Mode, c.HalfLife = mode, half
		return c
	}
	w := func(name, input string) Pipeline {
		return Pipeline{Name: name, Kind: KindWeighter, Input: input, Policy: def}
	}
	out := []Pipeline{
		w("external", InputExternal),
		w("fast", InputFast),
	}
	for _, c := range []struct {
		name string
		cp   weighter.CalibrationPolicy
	}{
		{"fast×ratio", cal(weighter.CalibrateRatio, 5*time.Minute)},
		{"fast×ratio hl=1m", cal(weighter.CalibrateRatio, time.Minute)},
		{"fast×ratio hl=15m", cal(weighter.CalibrateRatio, 15*time.Minute)},
		{"fast×ratio-ewma", cal(weighter.CalibrateRatioEWMA, 5*time.Minute)},
		{"fast×ratio last", cal(weighter.CalibrateRatio, 0)},
		{"fast+offset", cal(weighter.CalibrateOffset, 0)},
		{"fast+offset hl=1m", cal(weighter.CalibrateOffset, time.Minute)},
	} {
		p := w(c.name, InputCalibrated)
		p.Calibration = c.cp
		out = append(out, p)
	}
	slow := out[1]
	slow.Name, slow.FastWindow = "fast 10s", 10*time.Second
	out = append(out, slow)
	for _, base := range []string{"fast", "fast×ratio"} {
		p := out[slices.IndexFunc(out, func(p Pipeline) bool { return p.Name == base })]
		p.Name, p.FleetWide = "fleet"+strings.TrimPrefix(base, "fast"), true
		p.Default = p.Name == RecommendedPipeline
		out = append(out, p)
	}
	for _, sig := range []string{SignalContstats, SignalClosed} {
		for _, base := range []string{"fast", "fast×ratio"} {
			p := out[slices.IndexFunc(out, func(p Pipeline) bool { return p.Name == base })]
			p.Name, p.Signal, p.Default = base+" "+sig, sig, false
			out = append(out, p)
			if sig == SignalContstats {
				p.Name, p.FastWindow = base+" "+sig+" 10s", 10*time.Second
				out = append(out, p)
				if base == "fast" {
					p.Name, p.LagSessions = base+" "+sig+" lagged 10s", true
					out = append(out, p)
				}
			}
		}
	}
	return out
}

// SelectPipelines returns the baselines and the candidates named in list
// (comma-separated; "all" = every candidate; the shedding pipelines,
// ShedPipelines, by name only).
func SelectPipelines(list string) ([]Pipeline, error) {
	out := FleetBaselines()
	all := CandidatePipelines()
	if list == "all" {
		return append(out, all...), nil
	}
	all = append(all, ShedPipelines()...)
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		i := slices.IndexFunc(all, func(p Pipeline) bool { return p.Name == name })
		if i < 0 {
			var names []string
			for _, p := range all {
				names = append(names, p.Name)
			}
			return nil, fmt.Errorf("unknown pipeline %q (want all or some of: %s)", name, strings.Join(names, ", "))
		}
		out = append(out, all[i])
	}
	return out, nil
}

// RunFleet simulates every pipeline over the scenario (balancers, costs,
// background, fast signals, external metric) on the same connection stream, in
// parallel, and scores the servers' true loads. leastconn and oracle are added
// when missing (the gap figures need them).
func RunFleet(sc Scenario, pipelines []Pipeline) (*Report, error) {
	have := map[string]bool{}
	for _, p := range pipelines {
		have[p.Kind] = true
	}
	pipelines = slices.Clone(pipelines)
	for _, b := range FleetBaselines() {
		if (b.Kind == KindLeastconn || b.Kind == KindOracle) && !have[b.Kind] {
			pipelines = append(pipelines, b)
		}
	}
	return simulate(sc, pipelines)
}
