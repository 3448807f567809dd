package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"regexp"
	"slices"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// A backend's log must stay small enough to keep for months: a 1,000-server
// backend cycling every second wrote 3.4 million lines an hour with one line
// per weight, and a dead source one error a cycle for ever. cycleLog writes at
// most one line per backend per cycle at info and above, and only when
// something happened: weights written, the backend failing or recovering, its
// readiness changing. A run of failing (or holding) cycles is logged when it
// starts and for each new message in it, then summarised at its 10th cycle and
// after that at most every summaryEvery (and never more often than every 10
// cycles); the cycle that ends it says how long it lasted. Weights written
// are the daemon doing its job: with the fast signal nearly every cycle
// writes, so only notable writes are logged at once and the rest are
// summarised at most every writtenEvery (see written). The per-server
// detail is at debug.
type cycleLog struct {
	log *slog.Logger
	// retry is set by the runner for a cycle it runs sooner than its
	// interval (pinRetry: pins, while HAProxy restarts): one failing
	// again does not count towards the run's error and summaries, which
	// are counted in cycles of the interval.
	retry bool

	// The run of cycles that did not end ok; zero cycles when the last one did.
	cycles      int       // cycles in the run
	since       time.Time // start of the run's first cycle
	result      string    // result of the run's latest cycle
	seen        map[string]bool
	summaryAt   time.Time // when the run was last logged (its start or a summary)
	summaryN    int       // cycles in the run at that time
	summarised  bool      // a summary line was written for the run
	ready       bool      // readiness as last logged
	unknown     map[string]bool
	unknownFull bool // maxUnknown names logged; the rest are not

	// The fast signal and its calibration, as last logged.
	fastKnown  bool            // fastDead has been logged (or set at start)
	fastDead   bool            // the fast signal is dead: the source weighs alone
	extFailing bool            // the calibrating source fails while the fast signal weighs
	extWaiting bool            // the calibrating source has given no point yet, and said so
	expired    map[string]bool // servers whose calibration expired
	skipping   bool            // the fast read leaves streams out, and said so
	// unread are the servers the last fast read could not read, unreadSaid
	// those said at info once (unreadServers).
	unread, unreadSaid map[string]bool

	// gone are the sessions to shed found ended, as last said (shed.go).
	gone map[string]goneNote

	// pin is what was said of the backend's pins (pins.go).
	pin pinLog

	rare bool // the run bound's rare-arrivals mode (run_rare), as last logged

	// settling: the configured weights are kept after a reset while the
	// clients reconnect, since settleSince (the reset's cycle).
	settling    bool
	settleSince time.Time

	// Weights written (written): a write has been logged since start or
	// reload; a failing run ended and no write has followed since; the
	// writes not logged on their own since the last summary.
	wroteOnce bool
	recovered bool
	routine   routineWrites

	// would is, in a dry run, the weight each server was last said to be
	// wanted at ("would set"), so that a change is logged once, not every cycle.
	would map[string]int
}

const (
	// persistCycles: a failing run is an error once it reaches this many
	// cycles. Its first line is a warning: one failed cycle (a dial that
	// timed out on a loaded host, a source still answering at start) is
	// retried by the next, which usually recovers; at the persistCycles-th
	// the run is summarised at ERROR, and new messages are errors from then on.
	persistCycles = 3
	// summaryCycles: later summaries of a failing run come at least 10 cycles
	// apart, so a long interval does not make one every cycle.
	summaryCycles = 10
	// summaryEvery is the time between two summaries of a run after its first.
	summaryEvery = 10 * time.Minute
	// maxMessages bounds the messages of one run logged on their own; an error
	// that changes every cycle in a way normalise misses is then only summarised.
	maxMessages = 32
	// maxUnknown bounds the unknown server names remembered (and logged) per backend.
	maxUnknown = 10_000
	// writtenEvery is the shortest time, in cycle time (the plans' Time),
	// between two summaries of routine writes: at the default 2 s interval
	// about 30 cycles' writes in one line rather than one line each.
	writtenEvery = time.Minute
)

// clone returns a copy a reload's new runner can go on with: a backend failing
// across a reload goes on being summarised and logs its recovery, and a ready
// one does not log "ready" again.
func (l *cycleLog) clone(log *slog.Logger) *cycleLog {
	c := *l
	c.log = log
	c.seen, c.unknown, c.expired = maps.Clone(l.seen), maps.Clone(l.unknown), maps.Clone(l.expired)
	c.unread, c.unreadSaid = maps.Clone(l.unread), maps.Clone(l.unreadSaid)
	c.would = maps.Clone(l.would)
	c.gone = maps.Clone(l.gone)
	// The first write after a reload is logged at once, as after a start:
	// it says the new configuration weighs. Routine writes not yet
	// summarised stay and are summarised by the new runner.
	c.wroteOnce, c.pin.wroteOnce = false, false
	return &c
}

// line is the one info-or-above record a cycle may write: parts of the cycle
// add attributes to it, and the first message set names it.
type line struct {
	level slog.Level
	msg   string
	attrs []any
}

func (ln *line) add(level slog.Level, msg string, attrs ...any) {
	if ln.msg == "" {
		ln.msg = msg
	}
	ln.level = max(ln.level, level)
	ln.attrs = append(ln.attrs, attrs...)
}

// cycle logs one cycle that ended at end; ready is the backend's readiness
// after it. It returns the weight changes a dry run newly wanted (wouldSet).
func (l *cycleLog) cycle(c weighter.Cycle, end time.Time, ready bool) (would int) {
	ln := line{level: slog.LevelDebug}
	if c.Result == weighter.ResultOK {
		l.ok(&ln, c, end)
	} else {
		l.failed(&ln, c, end)
	}
	l.signal(&ln, c)
	l.reset(&ln, c)
	l.rareArrivals(&ln, c)
	l.written(&ln, c)
	would = l.wouldSet(&ln, c)
	if ready != l.ready {
		l.ready = ready
		if ready {
			ln.add(slog.LevelInfo, "backend ready", "ready", true)
		} else {
			ln.add(slog.LevelWarn, "backend not ready", "ready", false)
		}
	}
	if ln.msg == "" {
		// Only on a cycle with nothing else to say: the summary's
		// attributes (since, reason, …) would clash with another message's.
		l.summariseWrites(&ln, c)
	}
	if ln.msg != "" {
		l.log.Log(context.Background(), ln.level, ln.msg, ln.attrs...)
	}
	l.sheds(c)
	l.pins(c)
	l.unknownServers(c.Plan.Unknown)
	return would
}

func (l *cycleLog) ok(ln *line, c weighter.Cycle, end time.Time) {
	if l.cycles > 0 {
		l.recovered = true
		ln.add(slog.LevelInfo, "cycle ok again", "after", l.result, "failed_for", end.Sub(l.since).Round(time.Millisecond),
			"failed_cycles", l.cycles, "since", l.since)
	}
	l.cycles, l.seen = 0, nil
}

// failed logs a failing (or holding) cycle when its message is new in the
// run, or summarises the run when it is due.
func (l *cycleLog) failed(ln *line, c weighter.Cycle, end time.Time) {
	level, msg, detail := slog.LevelWarn, "cycle failed", []any{"result", c.Result, "err", c.Err}
	if l.retry && l.cycles > 0 {
		l.log.Debug("cycle failed again", append(detail, "retry", "sooner than the interval")...)
		return
	}
	if l.cycles+1 >= persistCycles {
		level = slog.LevelError
	}
	first := persistCycles // the first summary: a failure's makes it an error
	key := c.Result
	if c.Err != nil {
		key += ": " + normalise(c.Err.Error())
	}
	switch {
	case c.Result == weighter.ResultSkippedCoverage:
		level, msg = slog.LevelWarn, "holding weights"
		detail = []any{"result", c.Result, "reason", c.Plan.Reason, "coverage", c.Plan.Coverage}
		key += ": " + normalise(c.Plan.Reason)
		first = summaryCycles
	case errors.Is(c.Err, weighter.ErrFastStarting):
		// The first cycles of a backend whose metrics source has no point
		// yet: not a failure; the next read of the fast signal weighs.
		level, msg = slog.LevelInfo, "weights held at start"
		first = summaryCycles
	}
	if l.cycles == 0 {
		l.since, l.seen, l.summaryAt, l.summaryN, l.summarised = c.Plan.Time, map[string]bool{}, end, 0, false
	}
	l.cycles++
	l.result = c.Result
	switch {
	case !l.seen[key] && len(l.seen) < maxMessages:
		l.seen[key] = true
		if l.cycles > 1 {
			detail = append(detail, "failing_cycles", l.cycles, "since", l.since)
		}
		ln.add(level, msg, detail...)
	case l.due(end, first):
		l.summaryAt, l.summaryN, l.summarised = end, l.cycles, true
		still := "still failing"
		switch {
		case c.Result == weighter.ResultSkippedCoverage:
			still = "still holding weights"
		case errors.Is(c.Err, weighter.ErrFastStarting):
			still = "still starting" // nothing failed: no rate and no source data yet
		}
		ln.add(level, still, append(detail, "failing_cycles", l.cycles, "since", l.since,
			"for", end.Sub(l.since).Round(time.Second))...)
	default:
		l.log.Debug(msg, detail...)
	}
}

// signal logs, at info and once per change, what the fast pipeline's state
// changes: the fast signal dead or alive again, the calibrating source
// failing or back, the calibration of some servers expired or back. Which
// servers is at debug.
func (l *cycleLog) signal(ln *line, c weighter.Cycle) {
	sig := c.Signal
	if sig == nil {
		return
	}
	dead := sig.Fast == weighter.FastDead
	switch {
	case l.fastKnown && dead == l.fastDead:
	case dead:
		ln.add(slog.LevelInfo, "fast signal dead", "fast_reason", sig.FastReason)
	case l.fastKnown:
		ln.add(slog.LevelInfo, "fast signal alive again", "fast", sig.Fast)
	}
	l.fastKnown, l.fastDead = true, dead
	switch skipping := sig.Skipped > 0; {
	case skipping && !l.skipping:
		ln.add(slog.LevelWarn, "streams left out of the fast signal",
			"skipped", sig.Skipped, "first", sig.SkipReason)
	case !skipping && l.skipping && sig.Streams > 0:
		ln.add(slog.LevelInfo, "every stream read again")
	}
	if sig.Streams > 0 || sig.Skipped > 0 {
		l.skipping = sig.Skipped > 0
	}
	if sig.ExternalFetched && sig.Calibrate && sig.Pipeline != weighter.PipelineExternal {
		l.calibratingSource(ln, sig)
	}
	if sig.Pipeline != weighter.PipelineExternal {
		l.unreadServers(ln, sig)
	}
	if sig.Pipeline != weighter.PipelineCalibrated {
		return
	}
	now := map[string]bool{}
	for _, name := range sig.Expired {
		now[name] = true
		if !l.expired[name] {
			l.log.Debug("calibration expired", "server", name, "reason", sig.Servers[name].Note)
		}
	}
	for name := range l.expired {
		if !now[name] {
			l.log.Debug("calibration back", "server", name)
		}
	}
	switch {
	case len(now) > 0 && len(l.expired) == 0:
		// Not "servers": the cycle's "weights written" on the same line counts every server.
		attrs := []any{"uncalibrated", len(now)}
		if sig.ExternalAge >= 0 {
			attrs = append(attrs, "external_age", sig.ExternalAge.Round(time.Second))
		}
		ln.add(slog.LevelInfo, "calibration expired", attrs...)
	case len(now) == 0 && len(l.expired) > 0:
		ln.add(slog.LevelInfo, "calibration back", "calibrated_again", len(l.expired))
	}
	l.expired = now
}

// calibratingSource logs, once per change, the calibrating source's state
// while the fast signal weighs: waiting for its first point (at start, a
// metrics source with no point for the query yet: the fast signal weighs
// alone meanwhile, nothing failed), failing after it had given points
// (the calibration is held, then expires), or answering (again).
//
// Its error is source_err, not err: a failed cycle's own err may share the line.
func (l *cycleLog) calibratingSource(ln *line, sig *weighter.Signal) {
	failing, never := sig.ExternalError != "", sig.ExternalAge < 0
	switch {
	case failing && never:
		if !l.extWaiting && !l.extFailing {
			ln.add(slog.LevelInfo, "calibration waiting for the source",
				"source_err", sig.ExternalError)
		}
		l.extWaiting = !l.extFailing
	case failing:
		if !l.extFailing {
			ln.add(slog.LevelInfo, "calibrating source failing",
				"source_err", sig.ExternalError)
		}
		l.extFailing, l.extWaiting = true, false
	case never: // an answer without a valid point: still waiting, said already or not
	case l.extWaiting && sig.Window == 0:
		// Data, but the step of the source's series is not known yet (one
		// point so far): calibration has not started; said when it has.
	case l.extWaiting:
		ln.add(slog.LevelInfo, "calibration starts")
		l.extWaiting = false
	case l.extFailing:
		ln.add(slog.LevelInfo, "calibrating source back")
		l.extFailing = false
	}
}

// due reports whether the failing run should be summarised now, the first
// time at its first-th cycle.
func (l *cycleLog) due(end time.Time, first int) bool {
	if !l.summarised {
		return l.cycles >= first
	}
	return l.cycles-l.summaryN >= summaryCycles && end.Sub(l.summaryAt) >= summaryEvery
}

// reset says when HAProxy reset every weight to the configuration's, and
// when the clients are back and the weights are fitted again (the plan no
// longer settling); that cycle's write is then said at once.
func (l *cycleLog) reset(ln *line, c weighter.Cycle) {
	if c.Plan.Reset {
		l.settling, l.settleSince = true, c.Plan.Time
		ln.add(slog.LevelInfo, "HAProxy reset the weights", "reset", true)
		return
	}
	if !l.settling || c.Result != weighter.ResultOK || c.Plan.Hold || c.Plan.Settling {
		return
	}
	l.settling, l.recovered = false, true
	ln.add(slog.LevelInfo, "clients reconnected after the reset", "settled_after", c.Plan.Time.Sub(l.settleSince).Round(time.Second))
}

// rareArrivals says once when new connections become rare on the backend
// (run_rare: the run bound spreads a burst) and once when they stop being
// rare; a cycle that held or failed says nothing about it.
func (l *cycleLog) rareArrivals(ln *line, c weighter.Cycle) {
	if c.Result != weighter.ResultOK || c.Plan.Hold || c.Plan.RareArrivals == l.rare {
		return
	}
	l.rare = c.Plan.RareArrivals
	if l.rare {
		ln.add(slog.LevelInfo, "new connections rare", "rare_arrivals", true)
	} else {
		ln.add(slog.LevelInfo, "new connections frequent again", "rare_arrivals", false)
	}
}

// written logs the weights a cycle wrote, each at debug (with the server's
// open connections). At info a write is said at once when it is notable —
// the backend's first since start or reload, one that drains a server (to
// weight 0) or undrains one (from 0), a plan starting again from HAProxy's
// reset weights, the first write after a failing or holding run — with its
// number, the largest move and the imbalance (max/mean load) that made it.
// Any other write is routine re-weighting: it is added to the summary that
// summariseWrites logs at most every writtenEvery.
func (l *cycleLog) written(ln *line, c weighter.Cycle) {
	if len(c.Written) == 0 {
		return
	}
	m := l.moves(c)
	if !l.wroteOnce || m.drained > 0 || m.undrained > 0 || c.Plan.Reset || l.recovered {
		l.wroteOnce, l.recovered = true, false
		attrs := []any{"written", len(c.Written), "servers", len(c.Plan.Servers)}
		if m.largest != "" {
			attrs = append(attrs, "largest", m.largest, "reason", m.reason)
		}
		if m.drained > 0 {
			attrs = append(attrs, "drained", m.drained)
		}
		if m.undrained > 0 {
			attrs = append(attrs, "undrained", m.undrained)
		}
		ln.add(slog.LevelInfo, "weights written", withImbalance(attrs, c)...)
		return
	}
	l.routine.add(c.Plan.Time, len(c.Written), m)
}

// writeMoves is what a cycle's writes did: its largest move (moveSize) and
// the servers it drained and undrained.
type writeMoves struct {
	size               float64 // moveSize of the largest; -1 for none
	largest, reason    string  // "s3 100→140" and its plan's reason
	drained, undrained int
}

// moves logs each weight c wrote at debug and returns their largest move and
// drains.
func (l *cycleLog) moves(c weighter.Cycle) writeMoves {
	to := make(map[string]int, len(c.Written))
	for _, ch := range c.Written {
		to[ch.Server] = ch.Weight
	}
	debug := l.log.Enabled(context.Background(), slog.LevelDebug)
	var sessions map[string]int
	if debug {
		sessions = make(map[string]int, len(c.Servers))
		for _, s := range c.Servers {
			sessions[s.Name] = s.Sessions
		}
	}
	m := writeMoves{size: -1}
	for i := range c.Plan.Servers {
		s := &c.Plan.Servers[i]
		w, ok := to[s.Server]
		if !ok {
			continue
		}
		if debug {
			l.log.Debug("weight set", "server", s.Server, "from", s.Current, "to", w, "load", s.Load,
				"sessions", sessions[s.Server], "reason", s.Reason)
		}
		switch {
		case s.Current > 0 && w == 0:
			m.drained++
		case s.Current == 0 && w > 0:
			m.undrained++
		}
		if size := moveSize(s.Current, w); size > m.size {
			m.size, m.largest, m.reason = size, fmt.Sprintf("%s %d→%d", s.Server, s.Current, w), s.Reason
		}
	}
	return m
}

// routineWrites are the writes not logged on their own since the last
// summary of them.
type routineWrites struct {
	since   time.Time // the plan time of the first
	writes  int       // cycles that wrote
	changes int       // server weights written
	move    writeMoves
}

func (r *routineWrites) add(at time.Time, changes int, m writeMoves) {
	if r.writes == 0 {
		*r = routineWrites{since: at, move: writeMoves{size: -1}}
	}
	r.writes++
	r.changes += changes
	if m.size > r.move.size {
		r.move = m
	}
}

// summariseWrites logs the routine writes in one line once writtenEvery has
// passed since the first of them: cycles that wrote, server weights changed,
// the largest move of the period and the imbalance now. Checked at every
// cycle, written or not, so a backend that stops writing still has its last
// writes said, without a timer; a period without writes says nothing.
func (l *cycleLog) summariseWrites(ln *line, c weighter.Cycle) {
	r := &l.routine
	if r.writes == 0 || c.Plan.Time.Sub(r.since) < writtenEvery {
		return
	}
	attrs := []any{"writes", r.writes, "changes", r.changes}
	if r.move.largest != "" {
		attrs = append(attrs, "largest", r.move.largest, "reason", r.move.reason)
	}
	ln.add(slog.LevelInfo, "weights written", append(withImbalance(attrs, c), "since", r.since)...)
	*r = routineWrites{}
}

// withImbalance adds the plan's imbalance (max/mean load) to attrs when it
// has one.
func withImbalance(attrs []any, c weighter.Cycle) []any {
	if c.Plan.Imbalance > 0 {
		attrs = append(attrs, "imbalance", round2(c.Plan.Imbalance))
	}
	return attrs
}

// moveSize ranks weight changes by ratio (64→128 is as large as 128→256),
// with weight 0 (a drain) or from 0 (an undrain) the largest.
func moveSize(from, to int) float64 {
	if from <= 0 || to <= 0 {
		return float64(max(from, to)) * 1e6
	}
	if to > from {
		return float64(to) / float64(from)
	}
	return float64(from) / float64(to)
}

func round2(v float64) float64 { return float64(int64(v*100+0.5)) / 100 }

// unknownServers logs, once each and at debug, the names a source returned
// that the backend has no server for.
func (l *cycleLog) unknownServers(names []string) {
	for _, n := range names {
		if l.unknown[n] || l.unknownFull {
			continue
		}
		if l.unknown == nil {
			l.unknown = map[string]bool{}
		}
		if len(l.unknown) >= maxUnknown {
			l.unknownFull = true
			l.log.Debug("more unknown server names not logged", "logged", maxUnknown)
			return
		}
		l.unknown[n] = true
		l.log.Debug("series for an unknown server", "server", n)
	}
}

// digits are what changes between two reports of the same failure: ports,
// addresses, durations, counts, timestamps.
var digits = regexp.MustCompile(`[0-9]+`)

// normalise is an error message with its numbers blanked, so "dial tcp
// 10.0.0.9:41234: i/o timeout after 1.45s" repeats as one failure.
func normalise(msg string) string { return digits.ReplaceAllLiteralString(msg, "#") }

// unreadServers says at info, once per server, that the fast read could not
// read it (a unix@ server, sessions the socket table does not show): it has
// no load and keeps its share, which the plan's reason says every cycle.
// Later changes are at debug: a server whose connections open and close
// between two reads can be unread one cycle in several, and a line each
// time would say nothing new.
func (l *cycleLog) unreadServers(ln *line, sig *weighter.Signal) {
	var fresh []string
	for _, name := range slices.Sorted(maps.Keys(sig.Unread)) {
		if !l.unread[name] {
			l.log.Debug("fast signal cannot read the server", "server", name, "reason", sig.Unread[name])
		}
		if !l.unreadSaid[name] {
			fresh = append(fresh, name)
		}
	}
	for name := range l.unread {
		if _, ok := sig.Unread[name]; !ok {
			l.log.Debug("fast signal reads the server again", "server", name)
		}
	}
	if len(fresh) > 0 {
		if l.unreadSaid == nil {
			l.unreadSaid = map[string]bool{}
		}
		for _, name := range fresh {
			l.unreadSaid[name] = true
		}
		ln.add(slog.LevelInfo, "fast signal cannot read some servers",
			"unread", weighter.QuoteSome(fresh), "unread_why", sig.Unread[fresh[0]])
	}
	l.unread = make(map[string]bool, len(sig.Unread))
	for name := range sig.Unread {
		l.unread[name] = true
	}
}
