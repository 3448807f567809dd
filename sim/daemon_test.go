package sim

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// recordingTarget is a simulated balancer's target that records every
// batch of weights written to it.
type recordingTarget struct {
	*simTarget
	batches [][]weighter.Change
}

func (r *recordingTarget) SetWeights(ctx context.Context, changes []weighter.Change) error {
	r.batches = append(r.batches, changes)
	return r.simTarget.SetWeights(ctx, changes)
}

// SetWeightsAndPins records the weights of a batch that may carry pins: a
// backend with a Pinner (every shipped one) writes through it.
func (r *recordingTarget) SetWeightsAndPins(ctx context.Context, changes []weighter.Change, pins weighter.PinChanges) error {
	if len(changes) > 0 {
		r.batches = append(r.batches, changes)
	}
	return r.simTarget.SetWeightsAndPins(ctx, changes, pins)
}

// TestDaemonsRunTheDaemonsCycle: every weight a simulated daemon writes,
// and every session it sheds, comes out of weighter.RunCycle: the target
// receives exactly each cycle's plan's changes, and the closes are the
// cycle's ShedResults. A simulator that planned and wrote by itself would
// write batches no Cycle accounts for.
func TestDaemonsRunTheDaemonsCycle(t *testing.T) {
	sc := WhaleScenario()
	sc.Duration, sc.Warmup = 14*time.Minute, time.Minute
	sc.Events = sc.Events[:1] // the first whales, at minute 8
	sc.Balancers = []float64{0.6, 0.4}
	str := newStream(sc)
	m, err := newModel(sc, ShedPipeline("", UnboundedShed()), str, owners(sc, str))
	require.NoError(t, err)
	targets := make([]*recordingTarget, len(m.lbs))
	for k, lb := range m.lbs {
		targets[k] = &recordingTarget{simTarget: lb.daemon.Target.(*simTarget)}
		lb.daemon.Target = targets[k]
	}
	var written, planned [][]weighter.Change
	closed := 0
	m.onCycle = func(lb *balancer, c weighter.Cycle) {
		if len(c.Written) > 0 {
			written = append(written, c.Written)
			planned = append(planned, c.Plan.Changes())
		}
		for _, s := range c.Sheds {
			if s.Outcome == weighter.ShedClosed {
				closed++
			}
		}
	}
	_, err = m.run()
	require.NoError(t, err)
	var got [][]weighter.Change
	for _, tg := range targets {
		got = append(got, tg.batches...)
	}
	require.NotEmpty(t, written, "the daemons wrote weights")
	assert.ElementsMatch(t, written, got, "every batch the targets got is a cycle's written changes")
	assert.Equal(t, planned, written, "each cycle wrote its plan's changes")
	sheds := 0
	for _, n := range m.shed.count {
		sheds += n
	}
	assert.Positive(t, closed, "the cycles shed")
	assert.GreaterOrEqual(t, closed, sheds, "every shed counted after the warmup was a cycle's close")
}

// TestNoHandMadeCycle: no function of the simulator plans, calibrates,
// combines fast loads or plans sheds by itself: those calls belong to the
// daemon's cycle (weighter.RunCycle and weighter.Fresh), which the
// simulator calls.
func TestNoHandMadeCycle(t *testing.T) {
	forbidden := map[string]bool{"Plan": true, "Commit": true, "NewCalibrator": true, "CombineFast": true,
		"Factors": true, "Changes": true}
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	calls := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		require.NoError(t, err)
		ast.Inspect(file, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if forbidden[sel.Sel.Name] {
				t.Errorf("%s: calls .%s: a cycle, fresh pipeline or shed plan made by hand", name, sel.Sel.Name)
			}
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == "weighter" && sel.Sel.Name == "RunCycle" {
				calls++
			}
			return true
		})
	}
	assert.Equal(t, 1, calls, "the simulator's one engine calls weighter.RunCycle")
}
