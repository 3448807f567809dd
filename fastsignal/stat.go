package fastsignal

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/haproxy"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// statReader is the last reader of the fast signal chain (chain.go)
// before the source alone: `show stat`'s per-server byte counters, from the
// cycle's own read (Backend.ReadStats), differenced between cycles.
//
// Why it is worth having: it costs HAProxy ~0.07 ms whatever the number of
// streams, and on a backend of short connections (HTTP) its counters move
// with every request, where the other two readers lose the connections
// that open and close between two reads. Its limit: a connection's bytes
// are counted when it closes, or every few seconds with `option contstats`
// (docs/research/haproxy-stream-counters.md), so on long-lived connections without
// contstats the counters stand still while data flows. The reader then
// says the signal is dead (sessions open, no byte moving for statDeadAfter
// reads) and the backend weighs by the source alone, as before there was a
// fast signal.
type statReader struct {
	hb    *haproxy.RuntimeBackend
	bytes weighter.Bytes

	mu     sync.Mutex
	prev   map[string]haproxy.ServerStat
	prevAt time.Time
	still  int // reads in a row with sessions open and no byte moving
}

// statDeadAfter is how many reads with sessions open and no byte moving
// make the stat counters dead: contstats moves them every ~5 s, so 5 reads
// at 2 s is past one update.
const statDeadAfter = 5

var _ weighter.LocalReader = (*statReader)(nil)

// ReadLocal reads the servers' counters and their rates since the last read.
func (s *statReader) ReadLocal(ctx context.Context, servers []weighter.ServerState) (weighter.LocalRead, error) {
	stats, at, err := s.hb.ReadStats(ctx)
	if err != nil {
		return weighter.LocalRead{}, fmt.Errorf("show stat: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := weighter.LocalRead{At: at, Since: s.prevAt, Servers: make(map[string]weighter.LocalCounter, len(stats))}
	span := at.Sub(s.prevAt).Seconds()
	cur := make(map[string]haproxy.ServerStat, len(stats))
	open, moved := false, false
	for _, st := range stats {
		cur[st.Server] = st
		c := weighter.LocalCounter{Bytes: float64(s.counter(st)), Sessions: float64(st.CurrentSessions), Reset: true}
		if p, ok := s.prev[st.Server]; ok && span > 0 && s.counter(st) >= s.counter(p) {
			c.Reset = false
			c.Rate = float64(s.counter(st)-s.counter(p)) / span
			c.Sessions = float64(st.CurrentSessions+p.CurrentSessions) / 2
			moved = moved || c.Rate > 0
		}
		open = open || st.CurrentSessions > 0
		out.Servers[st.Server] = c
	}
	for _, name := range weighter.Names(servers) {
		if _, ok := out.Servers[name]; !ok {
			out.Servers[name] = weighter.LocalCounter{Reset: true}
		}
	}
	if s.prev != nil && open && !moved {
		s.still++
	} else {
		s.still = 0
	}
	if s.still >= statDeadAfter {
		out.Dead = fmt.Errorf("%w (show stat: %d reads with sessions open and no byte counted: without option contstats its counters move when connections close)",
			haproxy.ErrLocalSignalDead, s.still)
	}
	s.prev, s.prevAt = cur, at
	return out, nil
}

// counter is a server's byte counter in the direction weighed by.
func (s *statReader) counter(st haproxy.ServerStat) uint64 {
	switch s.bytes {
	case weighter.BytesOut:
		return st.BytesOut
	case weighter.BytesBoth:
		return st.BytesIn + st.BytesOut
	}
	return st.BytesIn
}
