package weighter

import (
	"fmt"
	"time"
)

// After a reset (a restarted HAProxy, or a reload without a server-state
// file), the Controller keeps the weights HAProxy holds, the configuration's,
// while the backend refills: until the weightable servers' open connections
// grew by at most settleGrowth of them over the last cycle, for at most
// settleMax. Two things are wrong with the data meanwhile. A read that spans
// the restart measures connections that closed and others that opened part way
// through it (on a real HAProxy 2.6 the first cycle after a restart saw loads
// per connection from 330 to 5,000 against ~6,000 before it). And the servers
// hold only the clients that came back first, so weights fitted to them send
// the rest of the storm to whichever servers the first few left light
// (docs/research/bench-balance.md, "settling after a reset"). Equal configured weights
// place a storm by HAProxy's own connection counts, as plain leastconn does;
// the weights take over once the clients are back and a read has seen them.
const (
	settleGrowth = 0.05
	settleMax    = 30 * time.Second
)

// ReasonSettling is the note of a server whose configured weight is kept
// while the clients reconnect after a reset.
const ReasonSettling = "configured weight kept while the clients reconnect after the reset"

// settleState is the memory of a reset's settling.
type settleState struct {
	active bool
	since  time.Time // the cycle that found the reset
	open   int       // the weightable servers' open connections at the last cycle
}

// settle returns, when this cycle keeps the configured weights after a
// reset, the note of each server's reason, and "" when it weights. reset is
// this cycle's finding. The reset cycle itself always keeps them: its read
// spans the restart.
func (c *Controller) settle(now time.Time, ws []work, reset bool) string {
	open := 0
	for i := range ws {
		if ws[i].weightable() {
			open += ws[i].sessions
		}
	}
	s := &c.settling
	prev := s.open
	s.open = open
	switch {
	case reset:
		s.active, s.since = true, now
		return fmt.Sprintf("%s; %s (%d open connections)", ReasonReset, ReasonSettling, open)
	case !s.active:
		return ""
	}
	grew := open - prev
	held := now.Sub(s.since)
	if float64(grew) <= max(settleGrowth*float64(open), 1) || held >= settleMax {
		s.active = false
		return ""
	}
	return fmt.Sprintf("%s (%d open connections, %+d since the last cycle, %v so far)", ReasonSettling, open, grew, held.Round(time.Second))
}

// keepAll keeps every weightable server's weight with reason.
func keepAll(ws []work, reason string) {
	for i := range ws {
		if w := &ws[i]; w.weightable() {
			w.decide(ActionKeep, w.Current, reason)
		}
	}
}
