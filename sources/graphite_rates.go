package sources

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/internal/field"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// rateFuncs are the render functions that turn a counter into a rate: each
// takes the difference between consecutive points, which is a rate only when
// the series only ever goes up (perSecond and nonNegativeDerivative return null
// where it goes down, derivative a negative value).
var rateFuncs = map[string]bool{"perSecond": true, "nonNegativeDerivative": true, "derivative": true}

// carbonOwnRe matches a metric path of carbon's own metrics: carbon-cache's
// carbon.agents.<host>-<instance>.*, carbon-relay's carbon.relays.* and
// carbon-aggregator's carbon.aggregator.* (under the default
// CARBON_METRIC_PREFIX). carbon resets its counts every
// CARBON_METRIC_INTERVAL and writes each as one point: none of them is a
// counter, and the rate of any of them is not what the name says.
var carbonOwnRe = regexp.MustCompile(`(?:^|[^\w.-])carbon\.(?:agents|relays|aggregator)\.`)

// rateCall is one call of a rate function in a target: the function and its
// first argument (the series it takes the rate of), as written.
type rateCall struct {
	fn, arg string
}

// carbonOwn reports whether the call takes the rate of carbon's own metrics.
func (c rateCall) carbonOwn() bool { return carbonOwnRe.MatchString(c.arg) }

// rateCalls finds the rate function calls of a render target, nested ones
// too ("perSecond(sumSeries(perSecond(a.*)))" has two). It reads the target's
// syntax only as far as it needs: names, parentheses, quotes, and the commas
// of a path's {a,b} and [ab], which do not end an argument.
func rateCalls(target string) []rateCall {
	var out []rateCall
	for i := 0; i < len(target); i++ {
		c := target[i]
		if c == '"' || c == '\'' {
			i = skipQuoted(target, i)
			continue
		}
		if !isNameByte(c) || (i > 0 && (isNameByte(target[i-1]) || target[i-1] == '.')) {
			continue
		}
		j := i
		for j < len(target) && isNameByte(target[j]) {
			j++
		}
		k := j
		for k < len(target) && target[k] == ' ' {
			k++
		}
		if k < len(target) && target[k] == '(' && rateFuncs[target[i:j]] {
			if arg, ok := firstArg(target, k+1); ok {
				out = append(out, rateCall{fn: target[i:j], arg: arg})
			}
		}
		i = j - 1
	}
	return out
}

func isNameByte(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// skipQuoted returns the index of the quote that closes the string opened at
// s[i], or the last index when it is not closed.
func skipQuoted(s string, i int) int {
	for j := i + 1; j < len(s); j++ {
		if s[j] == s[i] {
			return j
		}
	}
	return len(s) - 1
}

// firstArg returns the argument that starts at s[start], up to the comma or
// the parenthesis that closes the call; ok is false when nothing closes it.
func firstArg(s string, start int) (arg string, ok bool) {
	depth := 0
	for j := start; j < len(s); j++ {
		switch s[j] {
		case '"', '\'':
			j = skipQuoted(s, j)
		case '(', '{', '[':
			depth++
		case ')', '}', ']':
			if depth == 0 {
				return trimSpace(s[start:j]), s[j] == ')'
			}
			depth--
		case ',':
			if depth == 0 {
				return trimSpace(s[start:j]), true
			}
		}
	}
	return "", false
}

func trimSpace(s string) string {
	for len(s) > 0 && s[0] == ' ' {
		s = s[1:]
	}
	for len(s) > 0 && s[len(s)-1] == ' ' {
		s = s[:len(s)-1]
	}
	return s
}

// carbonRateHint is the warning for a rate taken of carbon's own metrics.
// The target is not quoted back: it is a configuration value.
func carbonRateHint(fn string) error {
	return field.Errorf("target", "target: %s() of carbon's own metrics (carbon.agents.*, carbon.relays.*): "+
		"carbon writes each as a count per CARBON_METRIC_INTERVAL (default 60 s), not as a counter, so %s gives "+
		"the change from one interval to the next, not a rate; for datapoints/s write "+
		"scale(carbon.agents.*.metricsReceived, 0.0166667) (1/interval: 0.0166667 for 60 s)", fn, fn)
}

// Hints lists what in the configuration is valid but likely wrong, as
// warnings at the key's line: a rate taken of carbon's own metrics.
func (c GraphiteConfig) Hints() []error {
	for _, call := range rateCalls(c.Target) {
		if call.carbonOwn() {
			return []error{carbonRateHint(call.fn)}
		}
	}
	return nil
}

// A series whose value goes down in at least notCounterDowns steps, and in
// at least 1/notCounterShare of its steps, is not a counter: a counter goes
// down only when it is reset (a restart), once in a window.
const (
	notCounterDowns = 2
	notCounterShare = 4
)

// counterCheck is what a look at the series under a target's rate functions found.
type counterCheck struct {
	series, notCounters int
	// example is the series that went down most often, with the function
	// that takes its rate, the steps it went down in and its steps in all.
	example, fn  string
	downs, steps int
}

// checkCounters looks, once per source, at the series the target's rate
// functions (perSecond, nonNegativeDerivative, derivative) take the rate of,
// and warns when they go down too often to be counters: a count per interval
// (carbon's metricsReceived, statsd's stats_counts.*) wrapped in perSecond
// gives the change from one interval to the next, small numbers and nulls that
// weigh with confidence and mean nothing. The render reply of the target itself
// cannot tell: a null there is a step down or a gap alike. So the arguments are
// rendered once, over the same window. carbon's own metrics are left out:
// loading the configuration already warned of them by name (Hints). The
// check gets at most half the fetch's remaining time and a failure is only
// logged at debug: it must not cost the cycle.
func (g *Graphite) checkCounters(ctx context.Context) {
	if !g.counterCheck.CompareAndSwap(false, true) {
		return
	}
	var calls []rateCall
	for _, c := range rateCalls(g.cfg.Target) {
		if !c.carbonOwn() {
			calls = append(calls, c)
		}
	}
	if len(calls) == 0 {
		return
	}
	if d, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Until(d)/2)
		defer cancel()
	}
	var found counterCheck
	for _, c := range calls {
		cfg := g.cfg
		cfg.Target = c.arg
		body, err := g.get(ctx, renderURL(cfg))
		if err != nil {
			g.log.Debug("counter check skipped", "function", c.fn, "reason", "render of the rate function's argument failed", "err", err)
			return
		}
		raw, err := parseGraphite(body)
		if err != nil {
			g.log.Debug("counter check skipped", "function", c.fn, "reason", "render reply not decoded", "err", g.red.Error(err))
			return
		}
		for _, r := range raw {
			downs, steps := stepsDown(r.points)
			found.series++
			if downs < notCounterDowns || downs*notCounterShare < steps {
				continue
			}
			found.notCounters++
			if found.example == "" || downs*found.steps > found.downs*steps {
				found.example, found.downs, found.steps, found.fn = r.name, downs, steps, c.fn
			}
		}
	}
	if found.notCounters == 0 {
		return
	}
	g.log.Warn("rate of series that are not counters",
		"function", found.fn, "not_counters", found.notCounters, "series", found.series,
		"example", g.red.String(found.example), "went_down", fmt.Sprintf("%d of %d steps", found.downs, found.steps),
		"effect", "the target's loads are the change from one point to the next",
		"hint", "a count per interval (carbon's metricsReceived, statsd's stats_counts) is a rate once scaled: scale(series, 1/interval); perSecond is for counters that only go up")
}

// stepsDown counts, between consecutive valid values of a series (nulls and
// NaN skipped, as perSecond skips them), the steps and those where the value
// went down.
func stepsDown(pts weighter.Series) (downs, steps int) {
	prev := math.NaN()
	for _, p := range pts {
		if math.IsNaN(p.Value) || math.IsInf(p.Value, 0) {
			continue
		}
		if !math.IsNaN(prev) {
			steps++
			if p.Value < prev {
				downs++
			}
		}
		prev = p.Value
	}
	return downs, steps
}
