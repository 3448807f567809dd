package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/haproxy-weighter/haproxy-weighter/config"
	"github.com/haproxy-weighter/haproxy-weighter/haproxy"
	"github.com/haproxy-weighter/haproxy-weighter/internal/duration"
	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/haproxy-weighter/haproxy-weighter/metrics"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// loadSource returns the loads the test sets, dated now.
type loadSource struct {
	mu    sync.Mutex
	loads map[string]float64
	err   error
}

func (s *loadSource) set(loads map[string]float64, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loads, s.err = loads, err
}

func (s *loadSource) Fetch(context.Context, []weighter.ServerState) (weighter.Loads, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return nil, s.err
	}
	out := weighter.Loads{}
	for name, v := range s.loads {
		out[name] = weighter.Series{{Time: time.Unix(1_800_000_000, 0), Value: v}}
	}
	return out, nil
}

// readOnlyTarget lists fixed servers and fails the test on any write.
type readOnlyTarget struct {
	t       *testing.T
	mu      sync.Mutex
	servers []weighter.ServerState
	writes  int
}

func (r *readOnlyTarget) Servers(context.Context) ([]weighter.ServerState, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]weighter.ServerState(nil), r.servers...), nil
}

func (r *readOnlyTarget) SetWeights(_ context.Context, ch []weighter.Change) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes += len(ch)
	r.t.Errorf("a dry run wrote %v", ch)
	return nil
}

type dryFixture struct {
	d    *Daemon
	r    *runner
	src  *loadSource
	tgt  *readOnlyTarget
	reg  *prometheus.Registry
	logs *strings.Builder
}

// newDryFixture is a daemon with one backend (dry or not) over the test's
// source and target, its runner not started: the test steps it.
func newDryFixture(t *testing.T, dry bool, servers ...string) *dryFixture {
	t.Helper()
	p := weighter.DefaultPolicy()
	p.MaxStep, p.Deadband, p.MaxAge = 0, 0, 0
	ctl, err := weighter.NewController(p)
	if err != nil {
		t.Fatal(err)
	}
	f := &dryFixture{src: &loadSource{}, tgt: &readOnlyTarget{t: t}, reg: prometheus.NewRegistry(), logs: &strings.Builder{}}
	for _, s := range servers {
		f.tgt.servers = append(f.tgt.servers, weighter.ServerState{Name: s, Weight: 100, Admin: weighter.AdminReady, Operational: "up"})
	}
	log := slog.New(slog.NewTextHandler(&lockedWriter{b: f.logs}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	clock := testenv.NewClock()
	f.d = New(&config.Config{Interval: duration.Duration(10 * time.Second)}, Options{Log: log, Clock: clock, Registry: f.reg})
	u := &managedBackend{Backend: &weighter.Weigher{Name: "be", Source: f.src, Target: f.tgt, Controller: ctl}, Kind: "haproxy", dryRun: dry}
	f.r = newRunner(u, Timing{Interval: 10 * time.Second, Timeout: 10 * time.Second}, clock, f.d.metrics, log)
	f.d.metrics.Init("be")
	f.d.startDryRun(f.r, nil)
	f.d.group = &group{units: []*managedBackend{u}, runners: []*runner{f.r}}
	return f
}

// lockedWriter lets the status page's test read logs while cycles write them.
type lockedWriter struct {
	mu sync.Mutex
	b  *strings.Builder
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (f *dryFixture) gauge(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	want := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
	s := testenv.Series(t, f.reg, name, want)
	if len(s) == 0 {
		return -1
	}
	if s[0].GetCounter() != nil {
		return s[0].GetCounter().GetValue()
	}
	return s[0].GetGauge().GetValue()
}

// TestDryRunPlansExportsAndNeverWrites: a dry run's cycles are ok and exported
// like live ones (the desired weight beside HAProxy's), write nothing, and log
// and count a wanted change once, not every cycle it is still wanted.
func TestDryRunPlansExportsAndNeverWrites(t *testing.T) {
	f := newDryFixture(t, true, "s1", "s2")
	ctx := context.Background()
	step := func(loads map[string]float64) {
		t.Helper()
		f.src.set(loads, nil)
		if c := f.r.step(ctx); c.Result != weighter.ResultOK || c.Applied || len(c.Written) != 0 {
			t.Fatalf("dry cycle: result %s applied %v written %v err %v", c.Result, c.Applied, c.Written, c.Err)
		}
	}
	writes := func() float64 { return f.gauge(t, "haproxy_weighter_dry_run_weight_writes_total", "backend", "be") }
	if got := f.gauge(t, "haproxy_weighter_dry_run", "backend", "be"); got != 1 {
		t.Errorf("dry_run gauge %v, want 1", got)
	}
	if got := writes(); got != 0 {
		t.Errorf("dry_run_weight_writes_total %v before any cycle, want 0", got)
	}
	for range 3 {
		step(map[string]float64{"s1": 10, "s2": 40})
	}
	if got := writes(); got != 2 {
		t.Errorf("after 3 cycles wanting the same 2 changes: dry_run_weight_writes_total %v, want 2", got)
	}
	for server, want := range map[string][2]float64{"s1": {100, 256}, "s2": {100, 64}} {
		w := f.gauge(t, "haproxy_weighter_server_weight", "backend", "be", "server", server)
		d := f.gauge(t, "haproxy_weighter_server_desired_weight", "backend", "be", "server", server)
		if w != want[0] || d != want[1] {
			t.Errorf("%s: server_weight %v desired %v, want %v and %v", server, w, d, want[0], want[1])
		}
	}
	if got := f.gauge(t, "haproxy_weighter_weight_writes_total", "backend", "be"); got != 0 {
		t.Errorf("weight_writes_total %v in a dry run", got)
	}
	if !f.r.ready(f.r.clock.Now()) {
		t.Error("a dry run whose cycles are ok is not ready")
	}
	// The loads turn round: both wanted weights change, said once more.
	step(map[string]float64{"s1": 40, "s2": 10})
	step(map[string]float64{"s1": 40, "s2": 10})
	if got := writes(); got != 4 {
		t.Errorf("dry_run_weight_writes_total %v, want 4", got)
	}
	logs := f.logs.String()
	if n := strings.Count(logs, `msg="would set weights"`); n != 2 {
		t.Errorf("%d would-set lines, want 2 (one per change):\n%s", n, logs)
	}
	for _, want := range []string{`msg="dry run on" backend=be effect="planning and exporting, writing nothing to this backend"`,
		`msg="would set weights" backend=be would_set=2 servers=2 largest="s1 100→256"`,
		`msg="would set weights" backend=be would_set=2 servers=2 largest="s2 100→256"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("no %q in:\n%s", want, logs)
		}
	}
	if strings.Contains(logs, "weights written") {
		t.Errorf("a dry run logged a write:\n%s", logs)
	}
	if f.tgt.writes != 0 {
		t.Errorf("%d writes", f.tgt.writes)
	}
}

// TestDryRunSaysAChangeAgainAfterItWasDropped: a change the plan stops
// wanting and wants again is a new one; a failed cycle forgets nothing.
func TestDryRunSaysAChangeAgainAfterItWasDropped(t *testing.T) {
	f := newDryFixture(t, true, "s1", "s2")
	ctx := context.Background()
	f.src.set(map[string]float64{"s1": 10, "s2": 40}, nil)
	f.r.step(ctx)
	f.src.set(nil, context.DeadlineExceeded)
	f.r.step(ctx)
	f.src.set(map[string]float64{"s1": 10, "s2": 40}, nil)
	f.r.step(ctx)
	if got := f.gauge(t, "haproxy_weighter_dry_run_weight_writes_total", "backend", "be"); got != 2 {
		t.Errorf("after a failed cycle in between: %v, want 2", got)
	}
	f.src.set(map[string]float64{"s1": 10, "s2": 10}, nil) // s2 now wants 256: still a change from 100
	f.r.step(ctx)
	f.src.set(map[string]float64{"s1": 10, "s2": 40}, nil) // s2 back to 64: said again
	f.r.step(ctx)
	if got := f.gauge(t, "haproxy_weighter_dry_run_weight_writes_total", "backend", "be"); got != 4 {
		t.Errorf("dry_run_weight_writes_total %v, want 4", got)
	}
}

// TestLiveRunExportsDesiredWeight: desired_weight is exported live too, and
// the dry-run series say the backend is live.
func TestLiveRunExportsDesiredWeight(t *testing.T) {
	f := newFixture(t)
	f.r.step(context.Background())
	if n, err := testutil.GatherAndCount(f.reg, "haproxy_weighter_server_desired_weight"); err != nil || n != 2 {
		t.Fatalf("server_desired_weight series %d %v", n, err)
	}
	want := `
# HELP haproxy_weighter_server_desired_weight Weight the last plan wants for the server; server_weight is the one HAProxy (or IPVS) has. They differ while a change is held back (deadband, max_step) or in a dry run.
# TYPE haproxy_weighter_server_desired_weight gauge
haproxy_weighter_server_desired_weight{backend="be",server="s1"} 256
haproxy_weighter_server_desired_weight{backend="be",server="s2"} 64
`
	if err := testutil.GatherAndCompare(f.reg, strings.NewReader(want), "haproxy_weighter_server_desired_weight"); err != nil {
		t.Error(err)
	}
	live := newDryFixture(t, false, "s1")
	if got := live.gauge(t, "haproxy_weighter_dry_run", "backend", "be"); got != 0 {
		t.Errorf("dry_run gauge %v for a live backend", got)
	}
	if !live.r.apply {
		t.Error("a live backend's runner does not apply")
	}
}

// TestReloadIntoDryRunRestores: with restore_on_exit, a backend that a reload
// turns into a dry run gets its start-up weights back at that reload, as a
// removed one does, and after that nothing is written to it, not even at exit.
func TestReloadIntoDryRunRestores(t *testing.T) {
	h := startTwoServers(t)
	parse := func(dry bool) *config.Config {
		yml := fmt.Sprintf("listen: \"\"\ninterval: 100ms\nrestore_on_exit: true\nhaproxy: {socket: %s, timeout: 2s}\n"+
			"backends:\n  - name: be\n    dry_run: %v\n    source: {haproxy: {counter: bytes_in}}\n", h.Socket, dry)
		cfg, err := config.Parse("test.yml", []byte(yml), func(string) (string, bool) { return "", false })
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	n := &recordingNotifier{ready: make(chan struct{})}
	d := New(parse(false), Options{Notifier: n, Reload: func() (*config.Config, error) { return parse(true), nil }})
	r := startDaemon(t, d, n)
	testenv.WaitFor(t, "be's start-up weights kept", func() bool { return d.startWeights.has("be") })

	// Writes as the daemon's live cycles would (this source holds for its
	// rate window), into its record of its own drains.
	hc, err := haproxy.New(haproxy.Config{Socket: h.Socket, Timeout: duration.Duration(5 * time.Second)}, haproxy.OwnZeroes(d.zeroes))
	if err != nil {
		t.Fatal(err)
	}
	b := hc.Backend("be")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	weights := func() map[string]int { return mustWeights(ctx, t, b) }
	if err := b.SetWeights(ctx, []weighter.Change{{Server: "s1", Weight: 0}}); err != nil {
		t.Fatal(err)
	}
	r.hup <- syscall.SIGHUP
	testenv.WaitFor(t, "be's start-up weights back and its snapshot dropped after the reload made it dry", func() bool {
		got := weights()
		return !d.startWeights.has("be") && got["s1"] == 10 && got["s2"] == 20
	})
	// An operator's weight during the dry run stays after the daemon exits.
	if err := b.SetWeights(ctx, []weighter.Change{{Server: "s2", Weight: 55}}); err != nil {
		t.Fatal(err)
	}
	if err := r.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := weights(); got["s1"] != 10 || got["s2"] != 55 {
		t.Errorf("weights after a dry run's exit %v, want s1=10 and the operator's s2=55", got)
	}
}

// TestDryRunPropertyNeverWritesSaysOnce: over random loads (missing and
// invalid ones included) and source failures, a dry run never writes,
// exports HAProxy's weight as server_weight and the plan's as the desired
// one, and a cycle that wants what the one before wanted counts no change.
func TestDryRunPropertyNeverWritesSaysOnce(t *testing.T) {
	rng := rand.New(rand.NewPCG(16, 2))
	names := []string{"a", "b", "c", "d", "e"}
	f := newDryFixture(t, true, names...)
	randomLoads := func() map[string]float64 {
		loads := map[string]float64{}
		for _, n := range names {
			switch rng.IntN(8) {
			case 0: // missing
			case 1:
				loads[n] = math.NaN()
			case 2:
				loads[n] = -1
			default:
				loads[n] = rng.Float64() * 1000
			}
		}
		return loads
	}
	writes := func() float64 { return f.gauge(t, "haproxy_weighter_dry_run_weight_writes_total", "backend", "be") }
	for i := range 100 {
		var err error
		if rng.IntN(10) == 0 {
			err = errors.New("source down")
		}
		loads := randomLoads()
		f.src.set(loads, err)
		before := writes()
		c := f.r.step(context.Background())
		after := writes()
		sets := 0
		for _, s := range c.Plan.Servers {
			if s.Action == weighter.ActionSet {
				sets++
			}
		}
		if after < before || after-before > float64(sets) {
			t.Fatalf("cycle %d: counter %v → %v with %d changes planned", i, before, after, sets)
		}
		if c.Result == weighter.ResultOK {
			for _, s := range c.Plan.Servers {
				w := f.gauge(t, "haproxy_weighter_server_weight", "backend", "be", "server", s.Server)
				d := f.gauge(t, "haproxy_weighter_server_desired_weight", "backend", "be", "server", s.Server)
				if w != 100 || d != float64(s.New) {
					t.Fatalf("cycle %d %s: server_weight %v desired %v, want HAProxy's 100 and the plan's %d", i, s.Server, w, d, s.New)
				}
			}
			// The same loads again: the same plan, nothing new to say.
			f.src.set(loads, nil)
			if again := f.r.step(context.Background()); again.Result == weighter.ResultOK && writes() != after {
				t.Fatalf("cycle %d: a repeated plan counted %v more changes", i, writes()-after)
			}
		}
	}
	if f.tgt.writes != 0 {
		t.Fatalf("%d writes", f.tgt.writes)
	}
}

// TestDryRunLogVolume: a dry run logs by the same policy as a live run. With
// steady loads its 1,000-server backend says its wanted changes once in 600
// cycles, although every cycle wants them (HAProxy's weights do not move);
// with noisy loads, at most one line a cycle.
func TestDryRunLogVolume(t *testing.T) {
	const interval = time.Second
	run := func(src weighter.Source, names []string, clock *testenv.Clock, cycles int) (lines, size int) {
		ctl, err := weighter.NewController(weighter.DefaultPolicy())
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		log := slog.New(slog.NewTextHandler(&buf, nil))
		u := &managedBackend{Backend: &weighter.Weigher{Name: "be", Source: src, Target: newMapTarget(names), Controller: ctl}, dryRun: true}
		r := newRunner(u, Timing{Interval: interval, Timeout: interval, Jitter: 0.1}, clock, metrics.New(prometheus.NewRegistry()), log)
		r.apply = false
		for range cycles {
			if c := r.step(context.Background()); c.Result != weighter.ResultOK {
				t.Fatalf("cycle: %s %v", c.Result, c.Err)
			}
			clock.Advance(interval)
		}
		return bytes.Count(buf.Bytes(), []byte("\n")), buf.Len()
	}

	clock := testenv.NewClock()
	noisy := newNoisySource(clock, 1000, 1)
	steady := &steadySource{clock: clock, loads: map[string]float64{}}
	for i, n := range noisy.names {
		steady.loads[n] = noisy.base[i]
	}
	const hour, steadyCycles = 3600, 600
	lines, size := run(steady, noisy.names, clock, steadyCycles)
	t.Logf("dry run, 1,000 servers, steady loads, interval 1s: %d lines, %d bytes in %d cycles", lines, size, steadyCycles)
	if lines != 1 { // the first cycle's would-set line, which carries ready=true, then nothing
		t.Errorf("steady dry run: %d lines in %d cycles, want the first cycle's would-set line only", lines, steadyCycles)
	}

	clock = testenv.NewClock()
	const busyCycles = 120
	lines, size = run(newNoisySource(clock, 1000, 1), noisy.names, clock, busyCycles)
	t.Logf("dry run, 1,000 servers, noisy loads, interval 1s: %d lines, %d bytes in %d cycles; per hour %d lines, %d bytes",
		lines, size, busyCycles, lines*hour/busyCycles, size*hour/busyCycles)
	if lines > busyCycles+10 {
		t.Errorf("noisy dry run: %d lines in %d cycles, want at most one per cycle", lines, busyCycles)
	}
}

// steadySource returns the same loads every cycle, dated by the clock.
type steadySource struct {
	clock Clock
	loads map[string]float64
}

func (s *steadySource) Fetch(context.Context, []weighter.ServerState) (weighter.Loads, error) {
	out := make(weighter.Loads, len(s.loads))
	for name, v := range s.loads {
		out[name] = weighter.Series{{Time: s.clock.Now(), Value: v}}
	}
	return out, nil
}
