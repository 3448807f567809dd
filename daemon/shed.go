package daemon

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// askOpenStreams has the unit's HAProxy fast reader list the open streams
// with their rates only when the backend sheds: nothing else reads them
// but the Pinner, which learns where each heavy client sits from the
// socket table's connections (listed when it pins, their streams not
// looked up).
func askOpenStreams(u *managedBackend) {
	if u.fast != nil && u.fast.chain != nil {
		u.fast.chain.SetShedder(u.Backend.Shedder)
		u.fast.chain.SetPinning(u.Backend.Pinner != nil)
	}
}

// keepShedder hands the new unit of a backend the old unit's Shedder when
// the reload left its shed policy as it was: its state is the caps and the
// client cooldowns, which a reload must not reset (a client shed a minute
// ago would be shed again at once). A changed policy gets a new Shedder
// that takes over those caps and cooldowns.
func keepShedder(old, next *managedBackend) {
	o, n := old.Backend.Shedder, next.Backend.Shedder
	switch {
	case o == nil || n == nil:
	case o.Policy() == n.Policy():
		next.Backend.Shedder = o
	default:
		n.Inherit(o)
	}
}

// inheritStuckShedders gives the new unit of each backend whose runner is
// stuck a copy of the stuck unit's shed caps and cooldowns: it starts afresh
// otherwise (keepControllers leaves a stuck unit alone), and a reload would
// free max_per_minute and every client's cooldown. A copy, not the Shedder
// itself: the stuck runner may still plan and close with its own.
func inheritStuckShedders(old []*managedBackend, stuck []string, next []*managedBackend) {
	for _, o := range old {
		if o.Backend.Shedder == nil || !slices.Contains(stuck, o.Backend.Name) {
			continue
		}
		for _, n := range next {
			if n.Backend.Name == o.Backend.Name && n.Backend.Shedder != nil {
				n.Backend.Shedder.Inherit(o.Backend.Shedder)
			}
		}
	}
}

// goneNote is a session to shed that was found ended: when last, and how
// many times.
type goneNote struct {
	at    time.Time
	times int
}

// goneForget is how long a session found ended is remembered for the log:
// one found ended again within it is not said again at info.
const goneForget = 10 * time.Minute

// sheds logs the cycle's session shedding: one info line per session shed
// (or, in a dry run, that would be) with its reason, which max_per_minute
// keeps rare; why nothing was shed at debug. A session to shed found ended
// is said once: should the fast signal list it again (its connection lives
// on in a process the close did not reach), the repeat is said once at
// warn, and the later ones at debug.
func (l *cycleLog) sheds(c weighter.Cycle) {
	p := c.Plan.Shed
	if p == nil {
		return
	}
	if !c.Applied {
		for _, sh := range p.Sheds {
			l.log.Info("would shed session", shedAttrs(sh, sh.DryRun())...)
		}
	}
	for _, r := range c.Sheds {
		switch r.Outcome {
		case weighter.ShedClosed:
			l.log.Info("session shed", shedAttrs(r.Shed, r.Reason)...)
		case weighter.ShedGone:
			l.goneSession(p.Time, r)
		case weighter.ShedFailed:
			l.log.Warn("session shed failed", append(shedAttrs(r.Shed, r.Reason), "err", r.Err)...)
		}
	}
	if len(p.Sheds) == 0 && p.Reason != "" {
		l.log.Debug("no session shed", "reason", p.Reason)
	}
}

// goneSession logs a session to shed found ended, once at info, once more
// at warn if it is found ended again, then at debug.
func (l *cycleLog) goneSession(now time.Time, r weighter.ShedResult) {
	for k, n := range l.gone {
		if now.Sub(n.at) > goneForget {
			delete(l.gone, k)
		}
	}
	if l.gone == nil {
		l.gone = map[string]goneNote{}
	}
	s := r.Session
	key := fmt.Sprintf("%s #%d %s", s.ID, s.Serial, s.Client)
	n := l.gone[key]
	n.at, n.times = now, n.times+1
	l.gone[key] = n
	attrs := shedAttrs(r.Shed, r.Reason)
	switch n.times {
	case 1:
		l.log.Info("session to shed already ended", append(attrs, "effect", "nothing closed")...)
	case 2:
		l.log.Warn("session to shed still listed after it ended",
			append(attrs, "times", n.times, "err", r.Err, "next", "not said again for it")...)
	default:
		l.log.Debug("session to shed already ended", append(attrs, "times", n.times, "err", r.Err, "effect", "nothing closed")...)
	}
}

func shedAttrs(sh weighter.Shed, reason string) []any {
	return []any{"server", sh.Session.Server, "session", sh.Session.ID, "client", sh.Session.Client,
		"rate_bytes_per_second", math.Round(sh.Session.Rate), "age", sh.Session.Age.Round(time.Second),
		"load_ratio", round2(sh.Ratio), "predicted_ratio", round2(sh.After), "reason", reason}
}
