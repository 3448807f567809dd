package haproxy

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// fixedLoads is a Source that always reports the same loads.
type fixedLoads map[string]float64

func (f fixedLoads) Fetch(context.Context, []weighter.ServerState) (weighter.Loads, error) {
	loads := weighter.Loads{}
	for s, v := range f {
		loads[s] = weighter.Series{{Time: time.Now(), Value: v}}
	}
	return loads, nil
}

func cycleConfig(t testing.TB) string {
	cfg := testenv.HAProxyDefaults + "backend be_cyc\n  balance leastconn\n"
	for i := 1; i <= 4; i++ {
		cfg += fmt.Sprintf("  server s%d 127.0.0.1:%d weight 10\n", i, testenv.FreePort(t))
	}
	return cfg
}

// TestCycleSkipsMaintAndStartsAgainAfterRestart runs weighter.RunCycle against
// a real HAProxy: a server the operator put in maint is left alone, and after
// HAProxy restarts (every weight back to the configuration's, every connection
// the old weights were fitted to gone) the cycle that finds it keeps the
// configuration's weights, and the next weights again from them, within
// max_step of them, rather than putting the old weights back.
func TestCycleSkipsMaintAndStartsAgainAfterRestart(t *testing.T) {
	h := testenv.StartHAProxy(t, cycleConfig(t))
	c := newClient(t, h.Socket)
	require.Empty(t, raw(t, c, "disable server be_cyc/s4"))
	ctrl, err := weighter.NewController(weighter.DefaultPolicy())
	require.NoError(t, err)
	be := &weighter.Weigher{Name: "be_cyc", Target: c.Backend("be_cyc"), Controller: ctrl,
		Source: fixedLoads{"s1": 10, "s2": 20, "s3": 40, "s4": 5}}
	ctx := testCtx(t)

	cyc := weighter.RunCycle(ctx, be, time.Now(), true)
	require.NoError(t, cyc.Err)
	require.Equal(t, weighter.ResultOK, cyc.Result)
	require.NotEmpty(t, cyc.Written, "plan: %+v", cyc.Plan)
	for _, sp := range cyc.Plan.Servers {
		if sp.Server == "s4" {
			assert.Equal(t, weighter.ActionSkip, sp.Action, "maint server skipped: %+v", sp)
		}
	}
	applied := testenv.Weights(t, h.Socket, "be_cyc")
	assert.Equal(t, 10, applied["s4"], "maint server's weight untouched")
	assert.Equal(t, weighter.AdminMaint, byName(t, be.Target.(*RuntimeBackend))["s4"].Admin)
	assert.NotEqual(t, 10, applied["s1"], "a weight changed")

	// A restart also forgets the runtime "disable server": s4 comes back ready.
	h.Restart()
	reset := testenv.Weights(t, h.Socket, "be_cyc")
	require.Equal(t, map[string]int{"s1": 10, "s2": 10, "s3": 10, "s4": 10}, reset, "restart resets runtime weights")

	// The cycle that finds the reset keeps the configured weights (its
	// read spans the restart; the clients are still coming back) ...
	cyc = weighter.RunCycle(ctx, be, time.Now().Add(time.Minute), true)
	require.NoError(t, cyc.Err)
	require.Equal(t, weighter.ResultOK, cyc.Result)
	assert.True(t, cyc.Plan.Reset, "plan: %+v", cyc.Plan)
	assert.True(t, cyc.Plan.Settling, "plan: %+v", cyc.Plan)
	assert.Empty(t, cyc.Written)
	for _, sp := range cyc.Plan.Servers {
		if sp.Server != "s4" { // s4 was in maint: nothing written to forget
			require.Contains(t, sp.Reason, weighter.ReasonReset, sp.Server)
		}
	}
	require.Equal(t, reset, testenv.Weights(t, h.Socket, "be_cyc"), "nothing written while settling")

	// ... and the next, no connection arriving, weights from them.
	cyc = weighter.RunCycle(ctx, be, time.Now().Add(2*time.Minute), true)
	require.NoError(t, cyc.Err)
	require.Equal(t, weighter.ResultOK, cyc.Result)
	assert.False(t, cyc.Plan.Settling, "plan: %+v", cyc.Plan)
	after := testenv.Weights(t, h.Socket, "be_cyc")
	for _, sp := range cyc.Plan.Servers {
		if sp.Action == weighter.ActionSet {
			assert.Equal(t, sp.New, after[sp.Server], "%s: HAProxy has what the plan set", sp.Server)
		}
	}
	sum := 0
	for _, w := range after {
		sum += w
	}
	for _, sp := range cyc.Plan.Servers {
		// each share moved from the configuration's ¼ by at most max_step (2), up to rounding
		share := float64(after[sp.Server]) / float64(sum)
		assert.GreaterOrEqual(t, share, 0.125-0.01, "%s: %v", sp.Server, after)
		assert.LessOrEqual(t, share, 0.5+0.01, "%s: %v", sp.Server, after)
	}
	assert.Greater(t, after["s4"], after["s3"], "the lightest server gains on the heaviest: %v", after)
}

// TestCycleAfterKillReportsHAProxyError checks that a dead socket fails the cycle
// as haproxy_error and the next cycle after a start works without a new client.
func TestCycleAfterKillReportsHAProxyError(t *testing.T) {
	h := testenv.StartHAProxy(t, cycleConfig(t))
	b := newClient(t, h.Socket).Backend("be_cyc")
	h.Kill()
	_, err := b.Servers(testCtx(t))
	require.Error(t, err)
	h.Restart()
	require.Len(t, byName(t, b), 4, "same client reconnects")
}
