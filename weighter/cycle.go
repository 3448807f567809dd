package weighter

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Results of one cycle, as counted in haproxy_weighter_cycles_total{result},
// logged as result= and printed by once.
const (
	ResultOK          = "ok"
	ResultSourceError = "source_error"
	// ResultTargetError: the target (HAProxy or IPVS) could not be read or
	// written. Its value keeps the name it had when HAProxy was the only
	// target: alerts match on the metric label and scripts on once's output.
	ResultTargetError     = "haproxy_error"
	ResultSkippedCoverage = "skipped_coverage"
)

// Weigher weighs one backend: everything one of its cycles needs, where
// loads come from, where weights go, and the Controller that remembers what
// was written (a backend's configuration is config.Backend; HAProxy's
// backend, through the runtime socket, haproxy.RuntimeBackend).
type Weigher struct {
	Name       string
	Source     Source
	Target     Target
	Controller *Controller
	// Shedder, when set, plans session shedding each cycle from the fast
	// signal's per-session rates; the Target must be a SessionCloser.
	Shedder *Shedder
	// Pinner, when set, plans the pins of the backend's heavy clients each
	// cycle; it acts when the Target is a PinTarget.
	Pinner *Pinner
}

// Cycle is the outcome of one RunCycle.
type Cycle struct {
	Backend  string
	Plan     Plan
	Result   string // one of the Result* constants
	Err      error
	Duration time.Duration
	// Written are the changes the target accepted (nil in a dry run).
	Written []Change
	// Applied tells a real cycle from a dry run.
	Applied bool
	// Servers are the target's servers as the cycle read them (nil when
	// the read failed): what the source was handed and the plan made for.
	Servers []ServerState
	// Signal says what the loads were made of, when the source tells
	// (SignalSource: the fast signal and its calibration); nil otherwise.
	Signal *Signal
	// DataTime is, per server the source returned, the time of its newest
	// valid point (whatever its age): how old the data behind the plan is.
	DataTime map[string]time.Time
	// Sheds are the closes of Plan.Shed's sessions tried, with their
	// outcomes (nil in a dry run).
	Sheds []ShedResult
}

// RunCycle runs one cycle for b: read the target's servers, fetch the loads,
// plan, and — when apply is set — write the plan's changes. Any read error
// leaves the weights as they are: nothing is written without fresh loads and
// a fresh view of the servers. ctx bounds all I/O; now is the plan's clock.
func RunCycle(ctx context.Context, b *Weigher, now time.Time, apply bool) Cycle {
	start := time.Now()
	c := Cycle{Backend: b.Name, Applied: apply, Plan: Plan{Backend: b.Name, Time: now}}
	c.Result, c.Err = runCycle(ctx, b, now, apply, &c)
	c.Duration = time.Since(start)
	return c
}

func runCycle(ctx context.Context, b *Weigher, now time.Time, apply bool, c *Cycle) (string, error) {
	servers, err := b.Target.Servers(ctx)
	if err != nil {
		return ResultTargetError, fmt.Errorf("read servers: %w", err)
	}
	c.Servers = servers
	pt, pins := b.Target.(PinTarget)
	pins = pins && b.Pinner != nil
	var table PinTable
	var tableErr error
	if pins {
		// After the servers, so that every pin the table names can be
		// matched to a server of this read.
		table, tableErr = pt.Pins(ctx)
	}
	fetchCtx, cancel := keepForWrite(ctx)
	var loads Loads
	if ss, ok := b.Source.(SignalSource); ok {
		loads, c.Signal, err = ss.FetchSignal(fetchCtx, servers)
	} else {
		loads, err = b.Source.Fetch(fetchCtx, servers)
	}
	cancel()
	if err != nil {
		return ResultSourceError, fmt.Errorf("fetch loads: %w", err)
	}
	c.DataTime = newestPoints(loads)
	c.Plan = b.Controller.Plan(now, loads, servers)
	c.Plan.Backend = b.Name
	annotate(&c.Plan, c.Signal)
	if err := matchServers(loads, servers); err != nil {
		// The plan (every server without data, held) stays for once to print.
		return ResultSourceError, err
	}
	if pins {
		c.Plan.Pins = planPins(b, now, c.Plan, servers, c.Signal, table, tableErr)
	}
	if b.Shedder != nil {
		c.Plan.Shed = planSheds(b, now, c.Plan, c.Signal)
	}
	if c.Plan.Hold {
		// A held plan changes no weight; the Controller already said why.
		// Its pins' withdrawals still happen: a drained server must lose
		// its pins whatever the loads.
		if !apply && pins {
			b.Pinner.unwritten(c.Plan.Pins)
		}
		if apply && c.Plan.Pins != nil && !c.Plan.Pins.Changes.Empty() {
			if err := pt.SetWeightsAndPins(ctx, nil, c.Plan.Pins.Changes); err != nil {
				return ResultTargetError, fmt.Errorf("write pins: %w", err)
			}
		}
		return ResultSkippedCoverage, nil
	}
	if !apply {
		// A dry run: everything from here on is the plan taking effect.
		dryRunSheds(b, c.Plan.Shed)
		if pins {
			b.Pinner.unwritten(c.Plan.Pins)
		}
		return ResultOK, nil
	}
	changes := c.Plan.Changes()
	var pinChanges PinChanges
	if c.Plan.Pins != nil {
		pinChanges = c.Plan.Pins.Changes
	}
	if len(changes) == 0 && pinChanges.Empty() {
		b.Controller.Commit(nil)
		return closeSheds(ctx, b, c)
	}
	what := "weights"
	if pins {
		// One batch: the pins cleared, the weights, the pins set.
		err = pt.SetWeightsAndPins(ctx, changes, pinChanges)
		what = "weights and pins"
	} else {
		err = b.Target.SetWeights(ctx, changes)
	}
	c.Written = accepted(changes, err)
	b.Controller.Commit(c.Written)
	var unconfirmed *UnconfirmedError
	if errors.As(err, &unconfirmed) {
		b.Controller.Sent(unconfirmed.Sent)
	}
	if err != nil {
		c.Plan.Shed.cancel("the " + what + " were not all written")
		return ResultTargetError, fmt.Errorf("write %s: %w", what, err)
	}
	return closeSheds(ctx, b, c)
}

// newestPoints returns the time of each series' newest valid point; a series
// without one is left out.
func newestPoints(loads Loads) map[string]time.Time {
	out := make(map[string]time.Time, len(loads))
	for name, s := range loads {
		for i := len(s) - 1; i >= 0; i-- {
			if validLoad(s[i].Value) {
				out[name] = s[i].Time
				break
			}
		}
	}
	return out
}

// annotate adds to each server's reason what its load was made of: its fast
// inputs and calibration, or that the external source stood in for a dead
// fast signal. The plan's columns stay as they are; the reason says it.
func annotate(p *Plan, sig *Signal) {
	if sig == nil {
		return
	}
	for i := range p.Servers {
		s := &p.Servers[i]
		note := ""
		if in, ok := sig.Servers[s.Server]; ok && sig.Pipeline != PipelineExternal {
			note = in.Note
		} else if why, ok := sig.Unread[s.Server]; ok && sig.Pipeline != PipelineExternal {
			note = "fast signal could not read it: " + why
		} else if sig.Pipeline == PipelineExternal && sig.Fast == FastDead {
			note = "external source alone (fast signal dead)"
		}
		switch {
		case note == "":
		case s.Reason == "":
			s.Reason = note
		default:
			s.Reason += "; " + note
		}
	}
}

// ErrNoServerMatch: the source returned series, and not one of them is named
// after a server of the backend.
var ErrNoServerMatch = errors.New("no series name matches a server of the backend")

// shownNames is how many names QuoteSome shows.
const shownNames = 5

// matchServers returns an ErrNoServerMatch error when loads has series and
// none of them names one of servers. That is a wrong server_label,
// server_regex, server_map or server_node (or a query for another backend),
// not a few servers without data: held as a low coverage, it would look like
// a source that works, and once would exit 0.
func matchServers(loads Loads, servers []ServerState) error {
	if len(loads) == 0 {
		return nil // no series at all: the source says so itself
	}
	for _, s := range servers {
		if _, ok := loads[s.Name]; ok {
			return nil
		}
	}
	got := slices.Sorted(maps.Keys(loads))
	want := make([]string, len(servers))
	for i, s := range servers {
		want[i] = s.Name
	}
	slices.Sort(want)
	return fmt.Errorf("%w: %d came back, such as %s; the backend's %d servers are %s "+
		"(check server_label, server_regex, server_map or server_node)",
		ErrNoServerMatch, len(got), QuoteSome(got), len(want), QuoteSome(want))
}

// QuoteSome quotes the first five names and counts the rest, for an error
// that names the series and servers that did not match.
func QuoteSome(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	shown := make([]string, 0, shownNames)
	for _, n := range names[:min(len(names), shownNames)] {
		shown = append(shown, fmt.Sprintf("%q", n))
	}
	out := strings.Join(shown, ", ")
	if more := len(names) - len(shown); more > 0 {
		out += fmt.Sprintf(" and %d more", more)
	}
	return out
}

// writeShare is the share of a cycle's remaining time that the source may not
// use: a source allowed to use it all (Graphite retrying until the deadline)
// would hand the write an expired context, and a batch cut in the middle
// leaves weights that HAProxy took but no one recorded.
const writeShare = 5 // 1/5

// keepForWrite returns ctx for the source, ending a fifth of the remaining
// time before ctx does.
func keepForWrite(ctx context.Context) (context.Context, context.CancelFunc) {
	dl, ok := ctx.Deadline()
	if !ok {
		return ctx, func() {}
	}
	left := time.Until(dl)
	if left <= 0 {
		return ctx, func() {}
	}
	return context.WithDeadline(ctx, dl.Add(-left/writeShare))
}

// accepted returns the changes a SetWeights call wrote: all of them on success,
// those not named by a *ServerError when the failure is attributed per server,
// and none when it is not (the write failed as a whole, or in part for a
// reason that names no server).
func accepted(changes []Change, err error) []Change {
	if err == nil {
		return changes
	}
	failed := map[string]bool{}
	if !perServer(err, failed) {
		return nil
	}
	var ok []Change
	for _, ch := range changes {
		if !failed[ch.Server] {
			ok = append(ok, ch)
		}
	}
	return ok
}

// perServer adds to failed the server of every *ServerError in err and reports
// whether err is made of them only: it looks through wrapping and errors.Join
// down to each leaf. errors.As would stop at the first ServerError of a
// wrapped Join and count the others' servers as written.
func perServer(err error, failed map[string]bool) bool {
	switch e := err.(type) {
	case *ServerError:
		failed[e.Server] = true
		return true
	case *PinError:
		return true // a pin's write, which fails no weight
	case interface{ Unwrap() []error }:
		all := true
		for _, leaf := range e.Unwrap() {
			all = perServer(leaf, failed) && all
		}
		return all
	}
	if inner := errors.Unwrap(err); inner != nil {
		return perServer(inner, failed)
	}
	return false
}
