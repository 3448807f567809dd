package daemon

import (
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/config"
	"github.com/haproxy-weighter/haproxy-weighter/haproxy"
	"github.com/haproxy-weighter/haproxy-weighter/internal/ownzero"
	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

func unitWith(t *testing.T, name, kind string, p weighter.Policy) *managedBackend {
	t.Helper()
	c, err := weighter.NewController(p)
	require.NoError(t, err)
	return &managedBackend{Kind: kind, Backend: &weighter.Weigher{Name: name, Controller: c}}
}

// TestReloadKeepsWhatWasWritten: a reload that leaves a backend's policy
// alone keeps its Controller (what it wrote, which it re-applies); a changed
// policy starts afresh. Which weight 0 is the daemon's own is not the
// Controller's memory (TestReloadKeepsTheDaemonsOwnZeroes).
func TestReloadKeepsWhatWasWritten(t *testing.T) {
	p := weighter.DefaultPolicy()
	old := []*managedBackend{unitWith(t, "be_a", "haproxy", p), unitWith(t, "be_b", "haproxy", p)}
	old[0].Backend.Controller.Commit([]weighter.Change{{Server: "s1", Weight: 0}})

	changed := p
	changed.LimitingFactor = 8
	next := []*managedBackend{unitWith(t, "be_a", "haproxy", p), unitWith(t, "be_b", "haproxy", changed), unitWith(t, "be_c", "haproxy", p)}
	fresh := next[1].Backend.Controller
	keepControllers(old, next)

	assert.Same(t, old[0].Backend.Controller, next[0].Backend.Controller, "unchanged policy keeps its state")
	assert.Same(t, fresh, next[1].Backend.Controller, "changed policy starts afresh")
}

// TestReloadKeepsTheDaemonsOwnZeroes: the units a reload builds read and
// write through the daemon's one record of its weight-0 writes, so that a
// drain written before the reload is still the daemon's own (the target says
// so, and the Controller, kept or not, resumes it), while a build with a
// record of its own (another daemon) takes it for an operator's.
func TestReloadKeepsTheDaemonsOwnZeroes(t *testing.T) {
	h := startFleetHAProxy(t, "be_a")
	cfg, err := config.Parse("test.yml", []byte("listen: \"\"\nhaproxy: {socket: "+h.Socket+"}\nbackends:\n  - name: be_a\n    source: {haproxy: {counter: bytes_in}}\n"),
		func(string) (string, bool) { return "", false })
	require.NoError(t, err)
	log := slog.New(slog.DiscardHandler)
	zeroes := &ownzero.Record{}
	before, err := build(cfg, log, buildOptions{zeroes: zeroes})
	require.NoError(t, err)
	ctx := testenv.Context(t, 10*time.Second)
	require.NoError(t, before[0].Backend.Target.SetWeights(ctx, []weighter.Change{{Server: "s1", Weight: 0}}))

	ownZero := func(u *managedBackend) bool {
		servers, err := u.Backend.Target.Servers(ctx)
		require.NoError(t, err)
		return servers[0].Name == "s1" && servers[0].OwnZero
	}
	reloaded, err := build(cfg, log, buildOptions{zeroes: zeroes}) // a new client: the socket's settings are built anew
	require.NoError(t, err)
	assert.True(t, ownZero(reloaded[0]), "the drain written before the reload is the daemon's")
	assert.NotEqual(t, weighter.ActionSkip, planS1AtZero(t, reloaded[0].Backend.Controller, true).Action, "a fresh Controller resumes it")

	other, err := build(cfg, log, buildOptions{})
	require.NoError(t, err)
	assert.False(t, ownZero(other[0]), "another record's drain is not this daemon's")
}

// planS1AtZero plans a cycle of servers s1, at weight 0 (the daemon's own
// when ownZero), and s2, both up and equally loaded, and returns s1's plan:
// skipped when the controller takes the 0 for an operator's drain.
func planS1AtZero(t *testing.T, c *weighter.Controller, ownZero bool) weighter.ServerPlan {
	t.Helper()
	servers := []weighter.ServerState{
		{Name: "s1", Weight: 0, InitialWeight: 100, Admin: weighter.AdminReady, Operational: "up", OwnZero: ownZero},
		{Name: "s2", Weight: 100, InitialWeight: 100, Admin: weighter.AdminReady, Operational: "up"},
	}
	now := time.Unix(1_800_000_000, 0)
	loads := weighter.Loads{"s1": {{Time: now, Value: 10}}, "s2": {{Time: now, Value: 10}}}
	plan := c.Plan(now, loads, servers)
	require.Len(t, plan.Servers, 2)
	return plan.Servers[0]
}

// buildUnits builds the units of a configuration (no HAProxy needed: Build
// does not dial).
func buildUnits(t *testing.T, yml string) []*managedBackend {
	t.Helper()
	cfg, err := config.Parse("test.yml", []byte(yml), func(string) (string, bool) { return "", false })
	require.NoError(t, err)
	units, err := Build(cfg, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	return units
}

// TestReloadKeepsUnchangedSource: a SIGHUP that leaves a backend's source (and,
// for the HAProxy stats source, the socket) alone keeps the source, and with it
// the counter reads of its rate window. A new one holds the weights for a whole
// rate_window (skipped_coverage), and with interval < rate_window/3 the backend
// went unready, after every reload.
func TestReloadKeepsUnchangedSource(t *testing.T) {
	build := func(yml string) []*managedBackend { return buildUnits(t, yml) }
	const head = "listen: \"\"\nhaproxy: {socket: /run/test.sock}\nbackends:\n"
	const stats = "    source: {haproxy: {counter: bytes_in}}\n"
	old := build(head + "  - name: be_a\n" + stats + "  - name: be_b\n" + stats)
	next := build(head + "  - name: be_a\n" + stats + "  - name: be_b\n    source: {haproxy: {counter: sessions_total}}\n")
	keepControllers(old, next)
	assert.Same(t, old[0].Backend.Source, next[0].Backend.Source, "unchanged source is kept")
	assert.NotSame(t, old[1].Backend.Source, next[1].Backend.Source, "changed source starts afresh")

	// The kept source reads through the new target: its Servers read is the
	// one the source is handed, so a cycle after the reload sends one show stat.
	// With the fast signal on (the default), the source is the fast signal's
	// fallback; the fast reader stays as it is, with its per-stream sums.
	rec := &recordReader{}
	old[0].fast.external = rec
	again := build(head + "  - name: be_a\n" + stats)
	keepControllers(old, again)
	require.Same(t, old[0].fast.fresh, again[0].Backend.Source)
	assert.Same(t, again[0].target, rec.through, "the kept source reads through the new target")
	assert.Same(t, old[0].fast.chain, again[0].fast.chain, "the kept fast reader keeps its sums (same socket)")

	const off = "    fast_signal: off\n"
	old = build(head + "  - name: be_a\n" + off + stats)
	rec = &recordReader{}
	old[0].Backend.Source = rec
	again = build(head + "  - name: be_a\n" + off + stats)
	keepControllers(old, again)
	require.Same(t, rec, again[0].Backend.Source)
	assert.Same(t, again[0].target, rec.through, "without the fast signal too")
	fast := build(head + "  - name: be_a\n" + stats)
	keepControllers(old, fast)
	assert.NotSame(t, rec, fast[0].Backend.Source, "turning the fast signal on starts afresh")

	moved := build("listen: \"\"\nhaproxy: {socket: /run/other.sock}\nbackends:\n  - name: be_a\n" + stats)
	keepControllers(old, moved)
	assert.NotSame(t, old[0].Backend.Source, moved[0].Backend.Source, "a stats source on another socket starts afresh")
}

// recordReader is a source that records the reader it is pointed at.
type recordReader struct {
	weighter.Source
	through haproxy.StatsReader
}

func (r *recordReader) ReadThrough(sr haproxy.StatsReader) { r.through = sr }
