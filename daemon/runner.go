package daemon

import (
	"context"
	"log/slog"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/metrics"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// Clock is the time the runners see; tests pass a fake one and never sleep.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Timing is how often and how long one backend cycles.
type Timing struct {
	Interval time.Duration
	Timeout  time.Duration // per cycle
	Jitter   float64       // ±share of Interval
}

// runner cycles one backend: one goroutine, so its cycles never overlap.
type runner struct {
	unit    *Unit
	timing  Timing
	apply   bool
	clock   Clock
	metrics *metrics.Metrics
	log     *slog.Logger
	rand    func() float64 // in [0, 1)
	after   func()         // called after each cycle (readiness)
	done    chan struct{}  // closed when the runner's goroutine ends
	// before, if set, runs under the cycle's timeout before each cycle; an
	// error fails the cycle as haproxy_error (restore_on_exit snapshot).
	before func(ctx context.Context) error

	mu         sync.Mutex
	started    time.Time
	lastOK     time.Time // end of the last ok cycle
	lastBeat   time.Time // end of the last cycle, whatever its result
	lastResult string
}

func newRunner(u *Unit, t Timing, clock Clock, m *metrics.Metrics, log *slog.Logger) *runner {
	now := clock.Now()
	return &runner{unit: u, timing: t, apply: true, clock: clock, metrics: m,
		log: log.With("backend", u.Backend.Name), rand: rand.Float64, started: now, lastBeat: now, done: make(chan struct{})}
}

// inherit takes over the last ok cycle and result of the runner a reload
// replaced (nil: none), so that a reload does not make a ready backend
// unready until its next ok cycle (a whole rate_window with the HAProxy
// stats source), and a backend failing across a reload still logs
// "cycle ok again" when it recovers.
func (r *runner) inherit(old *runner) {
	if old == nil {
		return
	}
	old.mu.Lock()
	lastOK, lastResult := old.lastOK, old.lastResult
	old.mu.Unlock()
	r.mu.Lock()
	r.lastOK, r.lastResult = lastOK, lastResult
	r.mu.Unlock()
}

// run cycles until stop ends: a cycle at once, then one every jittered
// interval. Cycles run under ctx, which only shutdown cancels: a reload
// (stop) lets the cycle in flight finish and commit what it wrote. Cut off
// mid-write, the weights HAProxy took would be unknown to the Controller the
// reload keeps, and a drain (weight 0) it wrote would look like an operator's.
func (r *runner) run(ctx, stop context.Context) {
	for stop.Err() == nil {
		r.step(ctx)
		select {
		case <-stop.Done():
			return
		case <-r.clock.After(r.next()):
		}
	}
}

// next is the interval with ±Jitter, so that balancers started together drift apart.
func (r *runner) next() time.Duration {
	j := r.timing.Jitter * (2*r.rand() - 1)
	if !(math.Abs(j) < 1) { // NaN or out-of-range jitter: wait ≤ 0 would cycle back to back
		j = 0
	}
	return time.Duration(float64(r.timing.Interval) * (1 + j))
}

// step runs one cycle under the cycle timeout and records its outcome.
func (r *runner) step(ctx context.Context) weighter.Cycle {
	cctx, cancel := context.WithTimeout(ctx, r.timing.Timeout)
	defer cancel()
	c := r.cycle(cctx)
	if ctx.Err() != nil {
		// Shutdown cancelled the cycle (a reload lets it finish): not a failure of the backend.
		r.log.Debug("cycle cancelled", "result", c.Result, "err", c.Err)
		logWritten(r.log, c)
		return c
	}
	// Log first: whoever sees the metric or readiness change finds the log line.
	r.logCycle(c, r.previous())
	end := r.clock.Now()
	r.mu.Lock()
	r.lastResult, r.lastBeat = c.Result, end
	if c.Result == weighter.ResultOK {
		r.lastOK = end
	}
	r.mu.Unlock()
	if r.metrics != nil {
		r.metrics.Observe(c)
	}
	if r.after != nil {
		r.after()
	}
	return c
}

// cycle runs before, then (if it did not fail) one weighter cycle.
func (r *runner) cycle(ctx context.Context) weighter.Cycle {
	now := r.clock.Now()
	if r.before != nil {
		if err := r.before(ctx); err != nil {
			name := r.unit.Backend.Name
			return weighter.Cycle{Backend: name, Plan: weighter.Plan{Backend: name, Time: now},
				Result: weighter.ResultHAProxyError, Err: err, Applied: r.apply}
		}
	}
	return weighter.RunCycle(ctx, r.unit.Backend, now, r.apply)
}

// beat records that the loop turned without a cycle (the start-up read).
func (r *runner) beat() {
	now := r.clock.Now()
	r.mu.Lock()
	r.lastBeat = now
	r.mu.Unlock()
}

// previous is the result of the cycle before, "" before the first.
func (r *runner) previous() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastResult
}

// logCycle writes one line per written change and one per failure, never one
// per unchanged server.
func (r *runner) logCycle(c weighter.Cycle, prev string) {
	switch c.Result {
	case weighter.ResultOK:
		if prev != "" && prev != weighter.ResultOK {
			r.log.Info("cycle ok again", "after", prev)
		}
	case weighter.ResultSkippedCoverage:
		r.log.Warn("holding weights", "reason", c.Plan.Reason, "coverage", c.Plan.Coverage)
	default:
		r.log.Error("cycle failed", "result", c.Result, "err", c.Err)
	}
	logWritten(r.log, c)
}

func logWritten(log *slog.Logger, c weighter.Cycle) {
	written := make(map[string]bool, len(c.Written))
	for _, ch := range c.Written {
		written[ch.Server] = true
	}
	for _, s := range c.Plan.Servers {
		if written[s.Server] {
			log.Info("weight set", "server", s.Server, "from", s.Current, "to", s.New,
				"load", s.Load, "reason", s.Reason)
		}
	}
}

// ready reports whether the backend had an ok cycle within 3 intervals, or
// within the longest time two ok cycles can end apart (interval + jitter +
// timeout) when that is longer: with timeout > 2 intervals, slow cycles that
// all succeed would otherwise flap readiness.
func (r *runner) ready(now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	window := max(3*r.timing.Interval,
		time.Duration(float64(r.timing.Interval)*(1+r.timing.Jitter))+r.timing.Timeout)
	return !r.lastOK.IsZero() && now.Sub(r.lastOK) <= window
}

// alive reports whether the runner's loop still turns: its last cycle ended
// within an interval plus jitter plus a timeout (plus one more interval of slack).
func (r *runner) alive(now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return now.Sub(r.lastBeat) <= 2*r.timing.Interval+r.timing.Timeout
}
