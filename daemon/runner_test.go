package daemon

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/haproxy-weighter/haproxy-weighter/metrics"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

type fakeSource struct {
	mu    sync.Mutex
	err   error
	calls int
}

func (f *fakeSource) Fetch(context.Context, []weighter.ServerState) (weighter.Loads, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.err != nil {
		return nil, f.err
	}
	at := time.Unix(1_800_000_000, 0)
	return weighter.Loads{"s1": {{Time: at, Value: 10}}, "s2": {{Time: at, Value: 40}}}, nil
}

func (f *fakeSource) setErr(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

type fakeTarget struct {
	mu      sync.Mutex
	weights map[string]int
}

func (f *fakeTarget) Servers(context.Context) ([]weighter.ServerState, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []weighter.ServerState
	for _, n := range []string{"s1", "s2"} {
		out = append(out, weighter.ServerState{Name: n, Weight: f.weights[n], Admin: weighter.AdminReady, Operational: "up"})
	}
	return out, nil
}

func (f *fakeTarget) SetWeights(_ context.Context, ch []weighter.Change) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range ch {
		f.weights[c.Server] = c.Weight
	}
	return nil
}

type fixture struct {
	r     *runner
	clock *testenv.Clock
	src   *fakeSource
	tgt   *fakeTarget
	reg   *prometheus.Registry
	logs  *strings.Builder
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	p := weighter.DefaultPolicy()
	p.MaxStep, p.Deadband, p.MaxAge = 0, 0, 0
	ctl, err := weighter.NewController(p)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{clock: testenv.NewClock(), src: &fakeSource{}, tgt: &fakeTarget{weights: map[string]int{"s1": 1, "s2": 1}},
		reg: prometheus.NewRegistry(), logs: &strings.Builder{}}
	u := &managedBackend{Backend: &weighter.Weigher{Name: "be", Source: f.src, Target: f.tgt, Controller: ctl}}
	log := slog.New(slog.NewTextHandler(f.logs, nil))
	f.r = newRunner(u, Timing{Interval: 10 * time.Second, Timeout: 10 * time.Second, Jitter: 0.1},
		f.clock, metrics.New(f.reg), log)
	return f
}

func (f *fixture) counter(t *testing.T, result string) float64 {
	t.Helper()
	return cycles(t, f.reg, "", result)
}

func TestStepReadinessAndMetrics(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if f.r.ready(f.clock.Now()) {
		t.Fatal("ready before any cycle")
	}
	if c := f.r.step(ctx); c.Result != weighter.ResultOK {
		t.Fatalf("first cycle: %s %v", c.Result, c.Err)
	}
	if !f.r.ready(f.clock.Now()) || f.tgt.weights["s1"] != 256 || f.tgt.weights["s2"] != 64 {
		t.Fatalf("after ok cycle: ready %v weights %v", f.r.ready(f.clock.Now()), f.tgt.weights)
	}
	f.src.setErr(errors.New("connection refused"))
	f.clock.Advance(20 * time.Second)
	if c := f.r.step(ctx); c.Result != weighter.ResultSourceError {
		t.Fatalf("result %s", c.Result)
	}
	if !f.r.ready(f.clock.Now()) {
		t.Error("not ready 20s (2 intervals) after the last ok cycle")
	}
	f.clock.Advance(11 * time.Second)
	if f.r.ready(f.clock.Now()) {
		t.Error("still ready 31s (> 3 intervals) after the last ok cycle")
	}
	if f.counter(t, "ok") != 1 || f.counter(t, "source_error") != 1 {
		t.Errorf("cycles ok %v source_error %v", f.counter(t, "ok"), f.counter(t, "source_error"))
	}
	if n, err := testutil.GatherAndCount(f.reg, "haproxy_weighter_server_weight"); err != nil || n != 2 {
		t.Errorf("server_weight series %d %v", n, err)
	}
	logs := f.logs.String()
	if strings.Count(logs, "\n") != 2 || !strings.Contains(logs, `msg="weights written" backend=be written=2 servers=2 largest="s1 1→256"`) ||
		!strings.Contains(logs, `msg="cycle failed" backend=be result=source_error`) {
		t.Errorf("logs:\n%s", logs)
	}
}

// TestSlowOKCyclesStayReady: with timeout > 2 intervals (allowed), cycles that
// all succeed but take most of the timeout end up to interval+jitter+timeout
// apart; readiness must not flap between them.
func TestSlowOKCyclesStayReady(t *testing.T) {
	f := newFixture(t)
	f.r.timing = Timing{Interval: 10 * time.Second, Timeout: 30 * time.Second, Jitter: 0.1}
	if c := f.r.step(context.Background()); c.Result != weighter.ResultOK {
		t.Fatalf("cycle: %s %v", c.Result, c.Err)
	}
	// The next cycle starts after at most 11s and may succeed just before 30s.
	f.clock.Advance(41 * time.Second)
	if !f.r.ready(f.clock.Now()) {
		t.Error("unready between two ok cycles")
	}
	f.clock.Advance(time.Second)
	if f.r.ready(f.clock.Now()) {
		t.Error("still ready after the longest gap between two ok cycles")
	}
}

func TestNextIsJittered(t *testing.T) {
	f := newFixture(t)
	for _, tt := range []struct {
		u    float64
		want time.Duration
	}{{0, 9 * time.Second}, {0.5, 10 * time.Second}, {0.75, 10500 * time.Millisecond}} {
		f.r.rand = func() float64 { return tt.u }
		if got := f.r.next(); got != tt.want {
			t.Errorf("rand %v: next %s, want %s", tt.u, got, tt.want)
		}
	}
}

// TestNextNeverSpins: a jitter that slipped past validation (jitter: .nan in
// YAML is accepted by config) made the wait negative, and the backend cycled
// back to back against HAProxy and its source. It must wait the interval.
func TestNextNeverSpins(t *testing.T) {
	f := newFixture(t)
	for _, j := range []float64{math.NaN(), math.Inf(1), 1, 3} {
		f.r.timing.Jitter = j
		f.r.rand = func() float64 { return 0 }
		if got := f.r.next(); got != 10*time.Second {
			t.Errorf("jitter %v: next %s, want the 10s interval", j, got)
		}
	}
}

// TestRunCyclesOnTicks drives the loop by hand: a cycle at once, then one per
// tick of the clock, each waiting for the previous one (no overlap).
func TestRunCyclesOnTicks(t *testing.T) {
	f := newFixture(t)
	f.r.rand = func() float64 { return 1 }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.r.run(ctx, ctx); close(done) }()
	for i := 1; i <= 3; i++ {
		if d := <-f.clock.Waits(); d != 11*time.Second { // the loop waits only after its cycle ended
			t.Fatalf("wait %s, want 11s", d)
		}
		f.src.mu.Lock()
		calls := f.src.calls
		f.src.mu.Unlock()
		if calls != i {
			t.Fatalf("%d fetches after %d cycles", calls, i)
		}
		if i < 3 {
			f.clock.Advance(11 * time.Second)
			f.clock.Fire()
		}
	}
	cancel()
	<-done
}

func TestCancelledCycleIsNotAFailure(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f.r.step(ctx)
	if f.counter(t, "source_error")+f.counter(t, "haproxy_error")+f.counter(t, "ok") != 0 {
		t.Error("a cycle cancelled by shutdown was counted")
	}
	if strings.Contains(f.logs.String(), "cycle failed") {
		t.Errorf("logged as a failure:\n%s", f.logs.String())
	}
}
