package lvs

import (
	"context"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// The fast count: IPVS keeps no bytes per connection, but it counts each real
// server's connections live, and a read costs one netlink dump. With a metrics
// source that calibrates, the daemon weighs an IPVS service by this count
// (weighter.Fresh): the calibration learns each server's load per connection
// from the source over the same seconds the count covers, and the kernel's
// least-connection scheduler places by the live count.

// countState is what ReadLocal keeps between reads.
type countState struct {
	at     time.Time
	open   map[string]float64 // connections at the last read
	total  map[string]float64 // connection-seconds so far
	reads  int
	nowFor func() time.Time
}

// ReadLocal reads the connections of every destination (Servers' Sessions:
// active for TCP and SCTP, active + inactive for UDP) and returns, per
// server, the mean connections since the previous read as Rate and Sessions
// and the connection-seconds so far as Bytes: the counter the calibration
// takes. A server's first read is Reset. The read is stamped with the time
// it was made.
func (s *Service) ReadLocal(ctx context.Context, _ []weighter.ServerState) (weighter.LocalRead, error) {
	states, err := s.Servers(ctx)
	if err != nil {
		return weighter.LocalRead{}, err
	}
	s.countMu.Lock()
	defer s.countMu.Unlock()
	c := &s.count
	if c.open == nil {
		c.open, c.total = map[string]float64{}, map[string]float64{}
	}
	now := time.Now()
	if c.nowFor != nil {
		now = c.nowFor()
	}
	out := weighter.LocalRead{At: now, Since: c.at, Servers: make(map[string]weighter.LocalCounter, len(states)), Counts: true}
	if !c.at.IsZero() && !now.After(c.at) {
		out.Since = time.Time{} // a clock that did not move: no span to take a mean over
	}
	dt := now.Sub(c.at).Seconds()
	open := make(map[string]float64, len(states))
	for _, st := range states {
		n := float64(st.Sessions)
		open[st.Name] = n
		prev, seen := c.open[st.Name]
		if !seen || out.Since.IsZero() {
			out.Servers[st.Name] = weighter.LocalCounter{Bytes: c.total[st.Name], Sessions: n, Reset: true}
			continue
		}
		mean := (prev + n) / 2 // the count moves by whole connections between reads: the trapezoid
		c.total[st.Name] += mean * dt
		out.Servers[st.Name] = weighter.LocalCounter{Bytes: c.total[st.Name], Rate: mean, Sessions: mean}
	}
	for name := range c.total {
		if _, ok := open[name]; !ok {
			delete(c.total, name) // gone from the service: a new one of that name starts afresh
		}
	}
	c.open, c.at = open, now
	return out, nil
}
