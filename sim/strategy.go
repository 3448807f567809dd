package sim

import (
	"fmt"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// Strategy kinds.
const (
	KindLeastconn  = "leastconn"  // HAProxy leastconn, equal static weights
	KindRoundrobin = "roundrobin" // smooth weighted roundrobin, equal static weights
	KindAgent      = "agent"      // leastconn + agent-check on every server
	KindOracle     = "oracle"     // least true load, knowing every rate
	KindWeighter   = "weighter"   // the real weighter.Controller setting weights
)

// initialWeight is the weight every server has in the configuration file.
const initialWeight = 100

// Strategy is one way of placing connections that a run compares.
type Strategy struct {
	Name      string
	Kind      string
	Algorithm string          // weighter only: leastconn (default) or roundrobin
	Policy    weighter.Policy // weighter only
	Default   bool            // the policy is weighter.DefaultPolicy()
	// PerConn feeds the weighter load per open connection instead of load: weights
	// ∝ connections/load, what equal loads need under leastconn.
	PerConn bool
}

// pipeline is the strategy as the simulator runs it: a baseline, or a daemon
// weighing by the external metric alone (`fast_signal: off`) with the
// strategy's policy, under its HAProxy algorithm.
func (st Strategy) pipeline() Pipeline {
	pl := Pipeline{Name: st.Name, Kind: st.Kind, Default: st.Default}
	if st.Kind == KindWeighter {
		pl.Input, pl.Policy, pl.PerConn = InputExternal, st.Policy, st.PerConn
		if st.Algorithm == KindRoundrobin {
			pl.Placement = PlacementRoundrobin
		}
	}
	return pl
}

// Baselines are the strategies every comparison includes.
func Baselines() []Strategy {
	return []Strategy{
		{Name: "leastconn", Kind: KindLeastconn},
		{Name: "roundrobin", Kind: KindRoundrobin},
		{Name: "agent-check", Kind: KindAgent},
		{Name: "oracle", Kind: KindOracle},
	}
}

// WeighterStrategy runs policy p under HAProxy leastconn, fed each server's load.
func WeighterStrategy(p weighter.Policy) Strategy { return weighterStrategy(p, false) }

// PerConnStrategy runs policy p under HAProxy leastconn, fed each server's load per
// open connection (named with a "per-conn" prefix).
func PerConnStrategy(p weighter.Policy) Strategy { return weighterStrategy(p, true) }

func weighterStrategy(p weighter.Policy, perConn bool) Strategy {
	st := Strategy{Name: PolicyLabel(p), Kind: KindWeighter, Algorithm: KindLeastconn, Policy: p, PerConn: perConn}
	if perConn {
		st.Name = "per-conn " + st.Name
	}
	st.Default = p == weighter.DefaultPolicy() && !perConn
	return st
}

// DefaultStrategies are the baselines, every registered weighting function with the
// default factors, and the default policy under roundrobin and fed load per connection.
func DefaultStrategies() []Strategy {
	out := Baselines()
	def := weighter.DefaultPolicy()
	for _, name := range weighter.FunctionNames() {
		p := def
		p.Function = name
		out = append(out, WeighterStrategy(p))
	}
	rr := WeighterStrategy(def)
	rr.Name, rr.Algorithm, rr.Default = rr.Name+" rr", KindRoundrobin, false
	return append(out, rr, PerConnStrategy(def))
}

// PolicyLabel names a policy by its function and the factors it uses.
func PolicyLabel(p weighter.Policy) string {
	factors := fmt.Sprintf("lf=%g a=%g", p.LimitingFactor, p.Aggressiveness)
	if p.Function == "feedback" {
		factors = fmt.Sprintf("g=%g", p.Gain)
	}
	label := fmt.Sprintf("%s %s db=%d ms=%g", p.Function, factors, p.Deadband, p.MaxStep)
	if p.MaxRun != weighter.DefaultPolicy().MaxRun {
		label += fmt.Sprintf(" mr=%g", p.MaxRun)
	}
	if p.ConnectionLife > 0 {
		label += " life=" + p.ConnectionLife.String()
	}
	if p.RateWindow > 0 {
		label += " rw=" + p.RateWindow.String()
	}
	return label
}
