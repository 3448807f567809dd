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
}

// picker returns the HAProxy placement the strategy runs under.
func (st Strategy) picker() picker {
	switch {
	case st.Kind == KindOracle:
		return pickOracle
	case st.Kind == KindRoundrobin, st.Kind == KindWeighter && st.Algorithm == KindRoundrobin:
		return pickRoundrobin
	}
	return pickLeastconn
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

// WeighterStrategy runs policy p under HAProxy leastconn.
func WeighterStrategy(p weighter.Policy) Strategy {
	return Strategy{Name: PolicyLabel(p), Kind: KindWeighter, Algorithm: KindLeastconn, Policy: p, Default: p == weighter.DefaultPolicy()}
}

// DefaultStrategies are the baselines, every registered weighting function with the
// default factors, and the default policy under roundrobin too.
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
	return append(out, rr)
}

// PolicyLabel names a policy by its function and the factors it uses.
func PolicyLabel(p weighter.Policy) string {
	factors := fmt.Sprintf("lf=%g a=%g", p.LimitingFactor, p.Aggressiveness)
	if p.Function == "feedback" {
		factors = fmt.Sprintf("g=%g", p.Gain)
	}
	return fmt.Sprintf("%s %s db=%d ms=%g", p.Function, factors, p.Deadband, p.MaxStep)
}
