package daemon

import (
	"context"
	"log/slog"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/metrics"
	"github.com/haproxy-weighter/haproxy-weighter/statuspage"
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
	// Overrun is how long past Timeout a cycle may still run: a batch of
	// weights once sent to HAProxy is finished, not cut (haproxy.timeout).
	Overrun time.Duration
}

// runner cycles one backend: one goroutine, so its cycles never overlap.
type runner struct {
	unit    *managedBackend
	timing  Timing
	apply   bool
	clock   Clock
	metrics *metrics.Metrics
	log     *slog.Logger
	rand    func() float64   // in [0, 1)
	after   func()           // called after each cycle (readiness)
	shared  *sharedAddresses // told each cycle's servers (nil: not told)
	done    chan struct{}    // closed when the runner's goroutine ends
	said    startSaid        // what the runner a reload replaced had said (run.go)

	mu       sync.Mutex
	started  time.Time
	lastOK   time.Time        // end of the last ok cycle
	lastBeat time.Time        // end of the last cycle, whatever its result
	cl       *cycleLog        // what was logged of the cycles so far
	last     statuspage.Cycle // the last cycle that ended (status page)
	plan     statuspage.Cycle // the last cycle that ended with a plan
	// servers are the target's servers as the newest cycle that read them
	// found them (/metrics' server_info): the cycle's own read, not a copy
	// the target keeps.
	servers []weighter.ServerState
	history *statuspage.History // the status page's last 15 minutes

	// lastStart is when the backend's last cycle started, carried over by a
	// reload (inheritSchedule): the next cycle waits for an interval after it,
	// so that reloads never make a backend cycle more often than its schedule.
	lastStart time.Time
	// firstAt is when run starts the first cycle (zero: at once); set before run.
	firstAt time.Time
}

func newRunner(u *managedBackend, t Timing, clock Clock, m *metrics.Metrics, log *slog.Logger) *runner {
	now := clock.Now()
	log = log.With("backend", u.Backend.Name)
	return &runner{unit: u, timing: t, apply: true, clock: clock, metrics: m,
		log: log, rand: rand.Float64, started: now, lastBeat: now, done: make(chan struct{}),
		cl: &cycleLog{log: log}, history: statuspage.NewHistory()}
}

// inherit takes over the last ok cycle and the log state of the runner a
// reload replaced (nil: none), so that a reload does not make a ready backend
// unready until its next ok cycle (a whole rate_window with the HAProxy
// stats source), and a backend failing across a reload goes on being
// summarised and still logs "cycle ok again" when it recovers. The status
// page goes on showing its last cycle and plan.
func (r *runner) inherit(old *runner) {
	if old == nil {
		return
	}
	old.mu.Lock()
	lastOK, cl, last, plan, history, servers := old.lastOK, old.cl.clone(r.log), old.last, old.plan, old.history, old.servers
	old.mu.Unlock()
	r.mu.Lock()
	r.lastOK, r.cl, r.last, r.plan, r.history, r.servers = lastOK, cl, last, plan, history, servers
	r.mu.Unlock()
}

// run cycles until stop ends: a cycle at once, then one every jittered
// interval, start to start, so that a slow or hung source does not stretch
// the period to interval + timeout. A cycle that outlasts its interval makes
// the loop skip the ticks it missed, as time.Ticker does, rather than run
// the late cycles back to back against a source or HAProxy that is already
// struggling. Cycles run under ctx, which only shutdown cancels: a reload
// (stop) lets the cycle in flight finish and commit what it wrote. Cut off
// mid-write, the weights HAProxy took would be unknown to the Controller the
// reload keeps, and a drain (weight 0) it wrote would look like an operator's.
//
// The first cycle waits until firstAt (a reload's carried-over schedule, or
// the fast signal's second read at start).
func (r *runner) run(ctx, stop context.Context) {
	start := r.clock.Now()
	r.mu.Lock()
	first := r.firstAt
	r.mu.Unlock()
	if first.After(start) {
		select {
		case <-stop.Done():
			return
		case <-r.clock.After(first.Sub(start)):
		}
		start = first
	}
	for stop.Err() == nil {
		c := r.step(ctx)
		next, now := start.Add(r.next()), r.clock.Now()
		retry := false
		if soon := r.pinRetry(c, now); !soon.IsZero() && soon.Before(next) {
			// HAProxy is restarting and the backend's pins are lost
			// with it: its clients come back within seconds.
			next, retry = soon, true
		}
		r.mu.Lock()
		r.cl.retry = retry // the next cycle's failure, if any, is this one's again
		r.mu.Unlock()
		for !next.After(now) {
			d := r.next()
			if d <= 0 { // no interval (a Timing built by hand): do not spin here
				next = now
				break
			}
			next = next.Add(d)
		}
		start = next
		select {
		case <-stop.Done():
			return
		case <-r.clock.After(next.Sub(now)):
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
	r.mu.Lock()
	r.lastStart = r.clock.Now()
	r.mu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, r.timing.Timeout)
	defer cancel()
	c := r.cycle(cctx)
	if ctx.Err() != nil {
		// Shutdown cancelled the cycle (a reload lets it finish): not a failure of the backend.
		level := slog.LevelDebug
		if len(c.Written) > 0 { // HAProxy took weights before the cancel: say so
			level = slog.LevelInfo
		}
		r.log.Log(ctx, level, "cycle cancelled by shutdown", "result", c.Result, "err", c.Err, "written", len(c.Written))
		return c
	}
	end := r.clock.Now()
	r.mu.Lock()
	r.lastBeat = end
	if c.Result == weighter.ResultOK {
		r.lastOK = end
	}
	ready := r.readyLocked(end)
	// Log first: whoever sees the metric or readiness change finds the log line.
	would := r.cl.cycle(c, end, ready)
	r.cl.untrackedClients(r.unit)
	r.cl.sayPinNotes(r.unit)
	r.last = statuspage.Cycle{Cycle: c, End: end}
	if r.last.Planned() {
		r.plan = r.last
	}
	if c.Servers != nil {
		r.servers = c.Servers
	}
	r.history.Record(r.last)
	r.mu.Unlock()
	if r.metrics != nil {
		r.metrics.Observe(c)
		r.metrics.AddDryRunWrites(c.Backend, would)
		n, read := r.unit.clients()
		r.metrics.SetClients(c.Backend, read, n.Tracked, n.Untracked)
	}
	if r.after != nil {
		r.after()
	}
	r.shared.note(r.log, r.unit, c)
	return c
}

// cycle runs one cycle of the backend as once does: start check, then the cycle.
func (r *runner) cycle(ctx context.Context) weighter.Cycle {
	return r.unit.CheckedCycle(ctx, r.clock.Now(), r.apply)
}

// fastAtStart records the fast signal's state the start-up read logged, so
// that the first cycle does not log it again.
func (r *runner) fastAtStart(st weighter.FastState) {
	if st == "" {
		return
	}
	r.mu.Lock()
	r.cl.fastDead = st == weighter.FastDead
	r.cl.fastKnown = true
	r.mu.Unlock()
}

// beat records that the loop turned without a cycle (the start-up read).
func (r *runner) beat() {
	now := r.clock.Now()
	r.mu.Lock()
	r.lastBeat = now
	r.mu.Unlock()
}

// inheritSchedule carries over the start of the last cycle of the runner a
// reload replaced (nil: none) and makes the first cycle wait an interval
// after it: a burst of reloads would otherwise cycle the backend at each
// (each a read of HAProxy, and, as max_step bounds a move per cycle, weights
// moving that many times faster). A backend that never cycled cycles at once.
func (r *runner) inheritSchedule(old *runner) {
	if old == nil {
		return
	}
	old.mu.Lock()
	last := old.lastStart
	old.mu.Unlock()
	if last.IsZero() {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lastStart = last
	r.firstAt = later(r.firstAt, last.Add(r.next()))
}

// waitFirstUntil makes the first cycle wait until at, bounded by two
// intervals from now so that the loop's liveness bound (alive: a cycle ends
// within two intervals and a timeout of the last beat) still holds.
func (r *runner) waitFirstUntil(at time.Time) {
	limit := r.clock.Now().Add(2 * r.timing.Interval)
	if at.After(limit) {
		at = limit
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.firstAt = later(r.firstAt, at)
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// waitForSecondRead makes the first cycle of a backend whose start-up read
// of the fast signal was its first (st starting) wait until the reader can
// read HAProxy again: a cycle before then gets the same dump back, has no
// rate, and weighs by the source alone, which at start may have no data yet
// (an ERROR for nothing, and no weights until the next cycle).
func (r *runner) waitForSecondRead(st weighter.FastState) {
	if st != weighter.FastStarting || r.unit.fast == nil || r.unit.fast.chain == nil {
		return
	}
	if next := r.unit.fast.chain.NextRead(); !next.IsZero() {
		r.waitFirstUntil(next)
	}
}

// knownServers are the servers the newest cycle read (nil before the first).
func (r *runner) knownServers() []weighter.ServerState {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.servers
}
