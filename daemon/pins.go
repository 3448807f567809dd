package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/config"
	"github.com/haproxy-weighter/haproxy-weighter/haproxy"
	"github.com/haproxy-weighter/haproxy-weighter/haproxycfg"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// defaultHAProxyConfig is where Debian's HAProxy keeps its configuration:
// read for a pinned backend's listeners when haproxy.config_file is not set.
const defaultHAProxyConfig = "/etc/haproxy/haproxy.cfg"

// pinNote is one thing that keeps a backend's clients from being measured
// (and pinned): a log line, said once the backend pins (pinLog.notes), or at
// start for a backend configured with pin.enabled: true.
type pinNote struct {
	kind  pinNoteKind
	attrs []any
}

// pinNoteKind is which of the fixed log messages a pinNote is.
type pinNoteKind int

const (
	noListener pinNoteKind = iota
	sharedFrontends
	skippedBinds
)

// say logs the note at level, each kind under its fixed message.
func (n pinNote) say(log *slog.Logger, level slog.Level, attrs ...any) {
	attrs = append(attrs, n.attrs...)
	ctx := context.Background()
	switch n.kind {
	case noListener:
		log.Log(ctx, level, "clients not measured", attrs...)
	case sharedFrontends:
		log.Log(ctx, level, "clients of shared frontends not measured", attrs...)
	case skippedBinds:
		log.Log(ctx, level, "clients of some binds not measured", attrs...)
	}
}

// pinListeners returns where backend b's clients connect, which the socket
// table reader lists them by (the clients pinning chooses from): the
// backend's pin.listeners, else the binds of the frontends that route to it
// alone in HAProxy's configuration file (haproxy.config_file, else Debian's
// default path when it is there), and what keeps clients from being
// measured (no listener found, frontends shared with other backends, binds
// the socket table cannot read).
func pinListeners(b config.Backend, sock haproxy.Config) ([]netip.AddrPort, []pinNote) {
	mode, _, configured := b.PinSettings()
	if mode == config.PinOff {
		return nil, nil
	}
	if len(configured) > 0 {
		var out []netip.AddrPort
		for _, l := range configured {
			if ap, err := config.ParseListener(l); err == nil { // validated
				out = append(out, ap)
			}
		}
		return out, nil
	}
	none := func(attrs ...any) []pinNote {
		return []pinNote{{noListener, append(attrs, "effect", "heavy clients are not pinned", "fix", "set pin.listeners")}}
	}
	path := sock.ConfigFile
	if path == "" {
		if _, err := os.Stat(defaultHAProxyConfig); err != nil {
			return nil, none("reason", "no listeners: neither pin.listeners nor haproxy.config_file is set")
		}
		path = defaultHAProxyConfig
	}
	f, err := haproxycfg.Read(path)
	if err != nil {
		return nil, none("reason", "HAProxy's configuration file not read", "file", path, "err", err)
	}
	ls, err := f.Listeners(b.Name)
	if err != nil {
		return nil, none("reason", "no listener found", "file", path, "err", err)
	}
	var notes []pinNote
	if len(ls.Shared) > 0 {
		notes = append(notes, pinNote{sharedFrontends, []any{"file", path, "frontends", strings.Join(ls.Shared, "; "),
			"effect", "their clients are not pinned (the socket table cannot tell which backend a connection went to)"}})
	}
	if len(ls.Skipped) > 0 {
		notes = append(notes, pinNote{skippedBinds, []any{"file", path, "binds", strings.Join(ls.Skipped, "; ")}})
	}
	if len(ls.Addrs) == 0 {
		notes = append(notes, none("reason", "no TCP bind routes to the backend alone", "file", path)...)
	}
	return ls.Addrs, notes
}

// sayPinNotes logs what keeps the backend's clients from being measured,
// once the backend pins (its table found), and again only when it changes
// (a reload): a backend without the table, which may never pin, is not
// told about its listeners.
func (l *cycleLog) sayPinNotes(u *managedBackend) {
	if l.pin.state != weighter.PinTableOK {
		return
	}
	key := fmt.Sprint(u.pinNotes)
	if key == l.pin.notes {
		return
	}
	l.pin.notes = key
	for _, n := range u.pinNotes {
		n.say(l.log, slog.LevelInfo)
	}
}

// keepPinner hands the new unit of a backend the old unit's Pinner when a
// reload left its pin policy as it was (its state: the pins it wants, the
// clients' quiet times); a changed policy's new Pinner takes them over.
func keepPinner(old, next *managedBackend) {
	o, n := old.Backend.Pinner, next.Backend.Pinner
	switch {
	case o == nil || n == nil:
	case o.Policy() == n.Policy():
		next.Backend.Pinner = o
	default:
		n.Inherit(o)
	}
}

// listConnsForPins has the socket table reader list the backend's
// connections for the Pinner (where each heavy client sits) only while the
// backend has a pin table: every HAProxy backend has a Pinner by default,
// and one without the table would pay a list of its connections at every
// read for nothing. Until a cycle has read the table, they are listed; a
// table that appears (a reload of HAProxy added it) has them listed from
// the next cycle on. A cycle that planned no pins (it failed before) leaves
// it as it was.
func listConnsForPins(u *managedBackend, c weighter.Cycle) {
	if u.fast == nil || u.fast.chain == nil || u.Backend.Pinner == nil || c.Plan.Pins == nil {
		return
	}
	u.fast.chain.SetPinning(!c.Plan.Pins.NoTable)
}

// pinLog is what a backend's log said of its pins, so that it says each
// state once.
type pinLog struct {
	state     string // the table state last logged (PinPlan.TableState), "" before any
	untracked bool   // untracked clients were said
	notes     string // the pin notes said (sayPinNotes)
	would     string // the dry run's last "would" set, said when it changes
	wroteOnce bool   // a batch of pins was said since start or reload
	routine   routinePins
}

// routinePins are the batches of pins written and not said on their own
// since the last summary of them.
type routinePins struct {
	since        time.Time // the plan time of the first
	writes       int       // batches
	set, cleared int
}

// pins logs the cycle's pins: the table found or missing, once each; the
// first batch of pins written since start or reload and a storm's first at
// info (how many set, cleared and in force), every other batch in a summary
// at most every writtenEvery, as routine weight writes are (each pin at
// debug); in a dry run what would be written, when it changes.
func (l *cycleLog) pins(c weighter.Cycle) {
	p := c.Plan.Pins
	if p == nil {
		return
	}
	state := p.TableState()
	if state != l.pin.state {
		switch state {
		case weighter.PinTableMissing:
			l.log.Info("clients not pinned", "reason", p.Reason,
				"fix", "add `stick-table type ip size 100k expire 2h` and `stick match src` to the backend (pin: false silences this)")
		case weighter.PinTableFull:
			l.log.Warn("pin table full", "table", p.Table, "pins", len(p.Pins),
				"effect", "no new pin (HAProxy would evict other entries silently)", "fix", "a larger size on the backend's stick-table")
		case weighter.PinTableError:
			l.log.Warn("pin table not read", "err", p.TableErr, "effect", "pins as they were; weighting goes on")
		default:
			l.log.Info("pinning heavy clients", "table", p.Table, "pins", len(p.Pins))
		}
		l.pin.state = state
	}
	if c.Applied {
		written := c.Result == weighter.ResultOK || c.Result == weighter.ResultSkippedCoverage
		if written && p.StormBegan {
			// Once per storm; its next cycles place again the clients
			// not back yet (each pin at debug).
			l.log.Info("reconnect storm pinned", "clients", p.Storm, "projected_max_mean", round2(p.Projected), "reason", p.Reason)
		}
		if written && !p.Changes.Empty() {
			// A failed batch is the cycle's failure, logged as such. A
			// storm's later cycles (every 250 ms while its clients come
			// back) place again those still away: said at debug, the
			// storm itself once at info.
			set, cleared := len(p.Changes.Set), len(p.Changes.Clear)
			stormLater := p.Storm > 0 && !p.StormBegan
			if !stormLater && (!l.pin.wroteOnce || p.StormBegan) {
				l.pin.wroteOnce = true
				l.log.Info("pins written", "set", set, "cleared", cleared, "pinned", len(p.Pins))
			} else {
				if r := &l.pin.routine; !stormLater {
					if r.writes == 0 {
						r.since = c.Plan.Time
					}
					r.writes, r.set, r.cleared = r.writes+1, r.set+set, r.cleared+cleared
				}
				l.log.Debug("pins written", "set", set, "cleared", cleared, "pinned", len(p.Pins))
			}
		}
		for _, w := range p.Why {
			l.log.Debug("pin", "client", w.Client, "from", w.From, "to", w.To, "reason", w.Reason)
		}
		if r := &l.pin.routine; r.writes > 0 && c.Plan.Time.Sub(r.since) >= writtenEvery {
			// Checked at every applied cycle, written or not, so the last
			// batches of a quiet spell are said without a timer.
			l.log.Info("pins written", "writes", r.writes, "set", r.set, "cleared", r.cleared, "pinned", len(p.Pins), "since", r.since)
			*r = routinePins{}
		}
		return
	}
	would := strings.Join(weighter.PinLines(p, true), "\n")
	if !p.Changes.Empty() && would != l.pin.would {
		for _, w := range p.Why {
			l.log.Info("would pin", "client", w.Client, "from", w.From, "to", w.To, "reason", w.DryRun())
		}
	}
	l.pin.would = would
}

// untrackedClients says once, at warn, that the backend has more client
// addresses than the socket table reader tracks: the ones beyond it are
// never pinned.
func (l *cycleLog) untrackedClients(u *managedBackend) {
	if u.fast == nil || u.fast.chain == nil || u.Backend.Pinner == nil || l.pin.untracked {
		return
	}
	if n := u.fast.chain.Clients(); n.Untracked > 0 {
		l.pin.untracked = true
		l.log.Warn("clients not tracked", "tracked", n.Tracked, "untracked", n.Untracked,
			"effect", "the clients beyond the bound are never pinned", "next", "not said again")
	}
}

// unpin withdraws, for restore_on_exit, the pins the daemon wants in each
// backend it pins: HAProxy is left as the daemon found it, and no pin of a
// stopped daemon outlives it to beat an operator's drain (a pin does, until
// its entry expires). Backends side by side, each within timeout.
func (d *Daemon) unpin(ctx context.Context, timeout time.Duration) error {
	g := d.current()
	if g == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	errs := make([]error, len(g.units))
	var wg sync.WaitGroup
	for i, u := range g.units {
		pt, ok := u.target.(weighter.PinTarget)
		if !ok || u.Backend.Pinner == nil || u.dryRun {
			continue
		}
		wanted := u.Backend.Pinner.Wanted()
		if len(wanted) == 0 {
			continue
		}
		clear := make([]string, len(wanted))
		for j, p := range wanted {
			clear[j] = p.Client
		}
		wg.Go(func() {
			if err := pt.SetWeightsAndPins(ctx, nil, weighter.PinChanges{Clear: clear}); err != nil {
				d.log.Error("pins not withdrawn", "backend", u.Backend.Name, "pins", len(clear), "err", err,
					"effect", "they stay until their entries expire", "fix", "clear table "+u.Backend.Name)
				errs[i] = fmt.Errorf("restore_on_exit: backend %s: withdraw pins: %w", u.Backend.Name, err)
				return
			}
			d.log.Info("pins withdrawn", "backend", u.Backend.Name, "pins", len(clear), "restore", "restore_on_exit")
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// pinRetryEvery is how soon a backend that pins tries again after HAProxy
// could not be read, while pinRetryFor has not passed since its last ok
// cycle: a restarted HAProxy has an empty table, its clients reconnect
// within seconds, and every one that arrives before the pins are written
// again is placed by the weights alone. A restart takes about a second;
// waiting the whole interval would miss half of the storm.
const (
	pinRetryEvery = 250 * time.Millisecond
	pinRetryFor   = 30 * time.Second
)

// pinRetry returns when the runner should cycle again after c, for the
// pins: now + pinRetryEvery after a cycle that placed a reconnect storm's
// clients (weighter.PinPlan.Storm: more may be on their way back), and
// after a cycle that could not read or write HAProxy on a backend that
// wants pins, within pinRetryFor of its last ok cycle; the zero time (no
// sooner than the schedule) otherwise. A HAProxy
// down for longer is retried on the schedule, as any target.
func (r *runner) pinRetry(c weighter.Cycle, now time.Time) time.Time {
	pn := r.unit.Backend.Pinner
	if p := c.Plan.Pins; p != nil && p.Storm > 0 && c.Applied &&
		(c.Result == weighter.ResultOK || c.Result == weighter.ResultSkippedCoverage) {
		// A reconnect storm: the clients not back yet are placed again
		// every cycle against where the others landed; sooner is better.
		return now.Add(pinRetryEvery)
	}
	if c.Result != weighter.ResultTargetError || pn == nil || len(pn.Wanted()) == 0 {
		return time.Time{}
	}
	r.mu.Lock()
	lastOK := r.lastOK
	r.mu.Unlock()
	if lastOK.IsZero() || now.Sub(lastOK) > pinRetryFor {
		return time.Time{}
	}
	return now.Add(pinRetryEvery)
}
