package weighter

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"
)

// FastState is the state of a backend's fast local signal.
type FastState string

// Fast signal states, as exported in haproxy_weighter_fast_signal_state.
const (
	// FastLive: the last two reads gave a rate; loads come from it.
	FastLive FastState = "live"
	// FastIdle: nothing open and nothing moved between the reads, so the
	// signal says nothing about the servers; loads come from the external source.
	FastIdle FastState = "idle"
	// FastStarting: one read so far (start, or a gap after failures).
	FastStarting FastState = "starting"
	// FastDead: the read fails, or no byte moved for several reads while
	// sessions were open; loads come from the external source.
	FastDead FastState = "dead"
	// FastOff: switched off (fast_signal: off, or a target without one).
	FastOff FastState = "off"
)

// Pipelines: where a cycle's loads came from.
const (
	PipelineCalibrated = "fast×calibration"
	PipelineFast       = "fast"
	PipelineExternal   = "external"
)

// Signal is what a Fresh source's cycle read and decided: the state of each
// input and, per server, what its fast load was made of.
type Signal struct {
	Pipeline   string    `json:"pipeline"`
	Fast       FastState `json:"fast"`
	FastReason string    `json:"fast_reason,omitempty"`
	// Streams is how many streams the fast read went through (0: unknown),
	// FastAge how old the read was.
	Streams int `json:"streams,omitempty"`
	// Skipped streams the fast read left out, and the first one's why
	// (LocalRead.Skipped).
	Skipped    int           `json:"skipped_streams,omitempty"`
	SkipReason string        `json:"skip_reason,omitempty"`
	FastAge    time.Duration `json:"-"`
	// FastAt is when the fast read was made (a reader may return the same
	// read to several cycles); zero when unknown.
	FastAt time.Time `json:"-"`
	// Calibrate tells whether the external source calibrates the fast signal
	// (false: it is only the fallback, `source: haproxy`).
	Calibrate bool `json:"calibrate"`
	// Window is the span each external point averages over (0: not known yet).
	Window time.Duration `json:"-"`
	// ExternalFetched is set when the external source was asked this cycle.
	ExternalFetched bool   `json:"external_fetched"`
	ExternalError   string `json:"external_error,omitempty"`
	// ExternalAge is the age of the newest external point read so far, -1
	// when none was.
	ExternalAge time.Duration `json:"-"`
	// Servers are the fast inputs of each server with a fast load.
	Servers map[string]FastInput `json:"servers,omitempty"`
	// Unread are the servers the fast read could not read, each with why
	// (LocalCounter.Unread): they have no fast load and keep their share.
	Unread map[string]string `json:"unread,omitempty"`
	// Peers says which other balancers' readings the fast signal includes
	// ("" without peers).
	Peers string `json:"peers,omitempty"`
	// Reader is what the fast read read (LocalRead.Reader; "" when the
	// reader does not say or the read failed).
	Reader string `json:"reader,omitempty"`
	// Uncalibrated counts the servers weighted by the fast signal alone
	// although calibration is on (no usable external point, or expired).
	Uncalibrated int `json:"uncalibrated"`
	// Expired are the servers, sorted, whose calibration expired (they had
	// one, and no usable external point for its hold): a state the log
	// follows without reading the servers' notes.
	Expired []string `json:"-"`
	// Sessions are the connections the fast read listed, with their rates,
	// while the fast signal carries the loads (for session shedding).
	Sessions []ShedSession `json:"-"`
	// Clients are the client addresses the fast read listed (LocalRead.Clients).
	Clients []Client `json:"-"`
}

// SignalSource is a Source that also says what its loads were made of.
// RunCycle calls FetchSignal, with the servers it read, instead of Fetch and
// keeps the Signal in the Cycle, even when the fetch failed.
type SignalSource interface {
	Source
	FetchSignal(ctx context.Context, servers []ServerState) (Loads, *Signal, error)
}

// ErrFastStarting marks a cycle that has no load at all because the fast
// signal has one read so far (start: a rate needs two) and the external
// source, which weighs meanwhile, failed too, typically a metrics source
// that has no point for the query yet. Weights are held; it is the start of
// a backend, not a failure of it, and the log says so without an ERROR.
var ErrFastStarting = errors.New("the fast signal has one read so far (a rate needs two)")

// FreshConfig configures a Fresh source.
type FreshConfig struct {
	// Fast reads the fast local signal.
	Fast LocalReader
	// External is the monitoring source: the calibration's input when
	// Calibrate is set, and the loads themselves while the fast signal is not
	// live. Required. One that is a BackgroundSource is asked through Start
	// and Take, never Fetch.
	External  Source
	Calibrate bool
	// Calibration is the calibration policy. With StepWindow its Window is
	// ignored: each point covers the spacing of its series, and is stamped at
	// its bucket's start (Graphite), so it is moved to the bucket's end.
	Calibration CalibrationPolicy
	StepWindow  bool
	// Refresh is how often the external source is asked while the fast signal
	// is live (it is asked every cycle when it is the load), and how often a
	// BackgroundSource's fetch starts, live or not.
	Refresh time.Duration
	// FirstWait, when set, makes a Fetch without an earlier read read twice,
	// this far apart (a single cycle: once).
	FirstWait time.Duration
	// Now is the clock for the external source's schedule and data age.
	Now func() time.Time
	// Sleep waits d or until ctx ends; nil sleeps for real.
	Sleep func(ctx context.Context, d time.Duration) error
}

// Fresh is the default source of an HAProxy backend: loads per connection
// from the fast local signal, calibrated per server by the slow external
// metric (docs/research/fresh-by-default.md), and the external metric alone while the
// fast signal is dead. It calls only the interfaces it is given. Safe for
// concurrent use, though a backend's cycles never overlap.
type Fresh struct {
	cfg FreshConfig

	mu        sync.Mutex
	cal       *Calibrator
	calWindow time.Duration // the window cal was built for (StepWindow)
	last      *LocalRead    // the last successful fast read
	state     FastState
	reason    string
	// askedAt is when the external source was last asked (a
	// BackgroundSource: when its last fetch started): the one schedule of
	// the external source (see refreshExternal).
	askedAt time.Time
	// answer is the external source's newest answer: the one copy of its
	// loads (a BackgroundSource hands each answer over once and keeps none).
	answer     Answer
	haveAnswer bool
	ext        Loads     // the calibration's view of the last good answer (shifted, StepWindow)
	newestExt  time.Time // newest point in ext
}

// Answer is one answer of a Source's fetch: its loads, or why none.
type Answer struct {
	Loads Loads
	Err   error
}

// BackgroundSource is an external Source slower than a cycle (a remote
// metrics source across the internet, a heavy query) whose fetches run in
// the background, one at a time (fastsignal.AnswerInBackground). A Fresh
// source starts a fetch when its schedule says (Start) and takes the answer
// in the cycles after (Take): no cycle waits for the source but the first,
// for its first answer. Its Fetch is then never called.
type BackgroundSource interface {
	Source
	// Start begins a fetch of servers unless one is running.
	Start(servers []ServerState)
	// Take hands over the answer of a fetch that ended since the last Take
	// (ok false when none has). While none has ever been taken it waits for
	// the fetch running, as long as ctx allows, and fails when it does not
	// come in time.
	Take(ctx context.Context) (a Answer, ok bool, err error)
}

var _ SignalSource = (*Fresh)(nil)

// NewFresh validates cfg and returns the source.
func NewFresh(cfg FreshConfig) (*Fresh, error) {
	if cfg.Fast == nil || cfg.External == nil {
		return nil, errors.New("fresh source: needs a fast reader and an external source")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Sleep == nil {
		cfg.Sleep = sleep
	}
	f := &Fresh{cfg: cfg, state: FastStarting}
	if cfg.Calibrate && !cfg.StepWindow {
		c, err := NewCalibrator(cfg.Calibration)
		if err != nil {
			return nil, err
		}
		f.cal, f.calWindow = c, cfg.Calibration.Window
	} else if cfg.Calibrate {
		p := cfg.Calibration
		p.Window = time.Second // a stand-in: the policy's other fields are checked now
		if err := p.Validate(); err != nil {
			return nil, err
		}
	}
	return f, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Fetch returns the loads of FetchSignal.
func (f *Fresh) Fetch(ctx context.Context, servers []ServerState) (Loads, error) {
	l, _, err := f.FetchSignal(ctx, servers)
	return l, err
}

// Prime reads the fast signal once, so that the first cycle has a rate.
func (f *Fresh) Prime(ctx context.Context, servers []ServerState) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, _, err := f.readFast(ctx, servers)
	return err
}

// FetchSignal reads the fast signal of servers, asks the external source
// when due, and returns the fast loads (calibrated when it can) or, when the
// fast signal is not live, the external loads. An external failure fails the
// cycle only when the external loads were the ones needed.
func (f *Fresh) FetchSignal(ctx context.Context, servers []ServerState) (Loads, *Signal, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.firstWait(ctx, servers); err != nil {
		return nil, f.signal(), err
	}
	cur, ok, ferr := f.readFast(ctx, servers)
	sig := f.signal()
	if ok {
		sig.Streams, sig.FastAge, sig.Peers, sig.Reader = cur.Streams, cur.Age, cur.Peers, cur.Reader
		sig.Skipped, sig.SkipReason = cur.Skipped, cur.SkipReason
		sig.FastAt = cur.At
	}
	ext, eerr := f.refreshExternal(ctx, servers, sig)
	if f.state != FastLive {
		sig.Pipeline = PipelineExternal
		return f.externalLoads(ext, eerr, ferr, sig)
	}
	loads := f.fastLoads(cur, sig)
	return loads, sig, nil
}

// firstWait makes a first fetch (FirstWait set: a single cycle, once) read
// the fast signal twice, FirstWait apart, so that it has a rate.
func (f *Fresh) firstWait(ctx context.Context, servers []ServerState) error {
	if f.last != nil || f.cfg.FirstWait <= 0 {
		return nil
	}
	if _, _, err := f.readFast(ctx, servers); err != nil {
		return nil // the read proper fails the same way, and says so
	}
	if err := f.cfg.Sleep(ctx, f.cfg.FirstWait); err != nil {
		return fmt.Errorf("wait for a second fast read: %w", err)
	}
	return nil
}

// refreshExternal asks the external source when due: every cycle when it
// is the load, else every Refresh; a failure waits for the next Refresh too,
// so a dead metrics source is not asked every 2 s while the fast signal
// carries the weights. Its answer feeds the calibration; the cycle's Signal
// says what was asked and how old the newest point is.
//
// This is the one schedule of the external source. A BackgroundSource
// (fastsignal.AnswerInBackground's) keeps no clock of its own: it only
// moves the fetch out of the cycle. The schedule is here because Fresh is what knows why
// the source is needed (the load itself while the fast signal is not live,
// the calibration every Refresh while it is), and because the simulator
// runs this same code.
func (f *Fresh) refreshExternal(ctx context.Context, servers []ServerState, sig *Signal) (Loads, error) {
	now := f.cfg.Now()
	live := f.state == FastLive
	refreshed := f.askedAt.IsZero() || now.Sub(f.askedAt) >= f.cfg.Refresh
	due := !live || (f.cfg.Calibrate && refreshed)
	var ext Loads
	var eerr error
	if due {
		sig.ExternalFetched = true
		ext, eerr = f.ask(ctx, servers, now, refreshed)
		switch {
		case eerr != nil:
			sig.ExternalError = eerr.Error()
		case f.cfg.Calibrate:
			if len(servers) > 0 {
				// A wrong server_label would otherwise leave every server
				// uncalibrated without a word while the fast signal weighs.
				if err := matchServers(ext, servers); err != nil {
					sig.ExternalError = err.Error()
				}
			}
		}
	}
	if f.cal != nil {
		f.cal.External(f.ext) // re-offered: a point newer than the newest read waits for the next one
	}
	sig.Window = f.calWindow
	if !f.newestExt.IsZero() {
		// After the fetch: an instant query's point is stamped when it was
		// asked, after now.
		sig.ExternalAge = max(f.cfg.Now().Sub(f.newestExt), 0)
	}
	return ext, eerr
}

// ask asks the external source in a cycle that is due and returns its
// newest answer. A source in the cycle is fetched now. A BackgroundSource's
// fetch starts only once a Refresh has passed since the last (refreshed),
// live or not: while its loads weigh, every cycle takes the newest answer as
// soon as it has come back, but a metrics source's data changes no faster
// than its refresh (15 s) and it is not asked every 2 s.
func (f *Fresh) ask(ctx context.Context, servers []ServerState, now time.Time, refreshed bool) (Loads, error) {
	bg, ok := f.cfg.External.(BackgroundSource)
	if !ok {
		f.askedAt = now
		loads, err := f.cfg.External.Fetch(ctx, servers)
		f.keepAnswer(Answer{Loads: loads, Err: err})
		return loads, err
	}
	if refreshed {
		f.askedAt = now
		bg.Start(servers)
	}
	a, ok, err := bg.Take(ctx)
	switch {
	case ok:
		f.keepAnswer(a)
	case !f.haveAnswer && err == nil:
		return nil, errors.New("the external source has not answered yet")
	case !f.haveAnswer:
		return nil, err // the first answer has not come in time
	}
	return f.answer.Loads, f.answer.Err
}

// keepAnswer keeps the external source's newest answer, and a good one for
// the calibration.
func (f *Fresh) keepAnswer(a Answer) {
	f.answer, f.haveAnswer = a, true
	if a.Err == nil && f.cfg.Calibrate {
		f.keepExternal(a.Loads)
	}
}

// externalLoads is the cycle's answer while the fast signal is not live:
// the external loads, or why there are none (with the fast signal's own
// failure, or ErrFastStarting before it has a rate).
func (f *Fresh) externalLoads(ext Loads, eerr, ferr error, sig *Signal) (Loads, *Signal, error) {
	switch {
	case eerr == nil:
		return ext, sig, nil
	case ferr != nil:
		return nil, sig, fmt.Errorf("%w (and the fast signal: %w)", eerr, ferr)
	case f.state == FastStarting:
		return nil, sig, fmt.Errorf("%w, and the source: %w", ErrFastStarting, eerr)
	}
	return nil, sig, eerr
}

// fastLoads is the cycle's answer while the fast signal is live: each
// server's fast load, times its calibration when the source calibrates, with
// what it was made of in the Signal.
func (f *Fresh) fastLoads(cur LocalRead, sig *Signal) Loads {
	cal := f.calibrations(cur, sig)
	loads, inputs := CombineFast(cur, cal)
	for _, name := range slices.Sorted(maps.Keys(cal)) {
		if _, ok := inputs[name]; ok && cal[name].Expired {
			sig.Expired = append(sig.Expired, name)
		}
	}
	for name, in := range inputs {
		if f.cfg.Calibrate && !in.Calibrated {
			sig.Uncalibrated++
		}
		in.Note = fastNote(in, f.cfg.Calibrate, cur.Counts)
		if cur.Reader != "" {
			in.Note += "; reader " + cur.Reader
		}
		if cur.Peers != "" {
			in.Note += "; " + cur.Peers
		}
		inputs[name] = in
	}
	sig.Servers = inputs
	sig.Unread = unread(cur)
	sig.Sessions = cur.Open
	sig.Clients = cur.Clients
	return loads
}

// unread are the servers of r its reader could not read, with why; nil
// when it read them all.
func unread(r LocalRead) map[string]string {
	var out map[string]string
	for name, c := range r.Servers {
		if c.Unread == "" {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[name] = c.Unread
	}
	return out
}

// calibrations are the servers' calibrations for the read (nil when the
// source does not calibrate), and the Signal's pipeline says which.
func (f *Fresh) calibrations(cur LocalRead, sig *Signal) map[string]Calibration {
	sig.Pipeline = PipelineFast
	if !f.cfg.Calibrate {
		return nil
	}
	sig.Pipeline = PipelineCalibrated
	all := slices.Sorted(maps.Keys(cur.Servers))
	if f.cal != nil {
		return f.cal.Factors(cur.At, all)
	}
	cal := map[string]Calibration{}
	for _, n := range all {
		cal[n] = Calibration{Factor: 1, Reason: "no calibration yet (the external series' step is not known yet)"}
	}
	return cal
}

// signal starts a cycle's Signal from the fast signal's state.
func (f *Fresh) signal() *Signal {
	return &Signal{Fast: f.state, FastReason: f.reason, Calibrate: f.cfg.Calibrate, ExternalAge: -1}
}

// readFast reads the fast signal and sets its state from the read; it
// returns the read and whether it succeeded. The Calibrator gets every
// good read (it ignores one it has seen).
func (f *Fresh) readFast(ctx context.Context, servers []ServerState) (LocalRead, bool, error) {
	cur, err := f.cfg.Fast.ReadLocal(ctx, servers)
	if err != nil {
		f.state, f.reason = FastDead, "fast signal read failed: "+err.Error()
		return cur, false, err
	}
	f.last = &cur
	if f.cal != nil {
		f.cal.Local(cur.At, counters(cur))
	}
	f.state, f.reason = fastState(cur)
	return cur, true, nil
}

// fastState is the state a read shows: dead as the reader says, or when it
// could read none of the servers (each Unread: it says nothing about any of
// them); starting while no server has a rate, idle when nothing is open and
// nothing moved on the servers it read (the signal then says nothing about
// the servers), else live. A server the reader could not read is neither
// rated nor busy: its 0 B/s is no measure.
func fastState(r LocalRead) (FastState, string) {
	if r.Dead != nil {
		return FastDead, r.Dead.Error()
	}
	rated, busy := false, false
	unread, first := 0, "" // first: the unread server named in the reason (the smallest name)
	for name, c := range r.Servers {
		if c.Unread != "" {
			if unread == 0 || name < first {
				first = name
			}
			unread++
			continue
		}
		if c.Reset {
			continue
		}
		rated = true
		if c.Rate > 0 || c.Sessions > 0 {
			busy = true
		}
	}
	switch {
	case unread > 0 && unread == len(r.Servers):
		return FastDead, fmt.Sprintf("the fast signal could read none of the %d servers (%s: %s)", unread, first, r.Servers[first].Unread)
	case r.Since.IsZero() || !rated:
		return FastStarting, "one read so far; a rate needs two"
	case !busy:
		return FastIdle, "no connection open and no byte moved through HAProxy"
	}
	return FastLive, ""
}

// counters are the servers' counters for the calibration. A server the
// reader could not read is left out: its counter did not count what it
// carried, and the source's load over it would make a wrong factor.
func counters(r LocalRead) map[string]float64 {
	out := make(map[string]float64, len(r.Servers))
	for name, c := range r.Servers {
		if c.Unread != "" {
			continue
		}
		out[name] = c.Bytes
	}
	return out
}

// keepExternal keeps the external source's answer for the calibration:
// Graphite's points moved to their bucket's end, and the calibration built
// (again) for the series' step when that is the window. The external age
// counts from its newest valid point.
func (f *Fresh) keepExternal(ext Loads) {
	if f.cfg.StepWindow {
		step := seriesStep(ext)
		if step <= 0 {
			return // one point per series: the step is not known yet
		}
		if step != f.calWindow {
			p := f.cfg.Calibration
			p.Window = step
			c, err := NewCalibrator(p)
			if err != nil {
				return
			}
			f.cal, f.calWindow = c, step
			if f.last != nil {
				f.cal.Local(f.last.At, counters(*f.last))
			}
		}
		shifted := make(Loads, len(ext))
		for name, ser := range ext {
			s := make(Series, len(ser))
			for i, p := range ser {
				s[i] = Point{Time: p.Time.Add(step), Value: p.Value}
			}
			shifted[name] = s
		}
		ext = shifted
	}
	f.ext = ext
	for _, ser := range ext {
		for _, p := range ser {
			// a null point (Graphite's buckets up to now) carries no data
			if validLoad(p.Value) && p.Time.After(f.newestExt) {
				f.newestExt = p.Time
			}
		}
	}
}

// seriesStep is the smallest spacing between two consecutive points of any
// series, 0 when no series has two.
func seriesStep(l Loads) time.Duration {
	var step time.Duration
	for _, ser := range l {
		for i := 1; i < len(ser); i++ {
			if d := ser[i].Time.Sub(ser[i-1].Time); d > 0 && (step == 0 || d < step) {
				step = d
			}
		}
	}
	return step
}

// State returns the fast signal's state and why (for the start log).
func (f *Fresh) State() (FastState, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.state, f.reason
}
