package haproxy

import (
	"slices"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// read is one server's counter and open sessions at one read of HAProxy.
type read struct {
	at       time.Time
	counter  uint64
	sessions uint64
}

// history keeps, per server, its reads (oldest first) back to the newest one at
// least window old, which is all a rate over window needs later: the reads
// of a source called every interval number about window/interval + 2.
type history struct {
	window  time.Duration
	minSpan time.Duration // shortest span a rate may cover (sample_interval, at most window)
	servers map[string][]read
}

func (h *history) empty() bool { return len(h.servers) == 0 }

// slack is how much shorter than window a span may be: a tenth, so that reads
// taken every window/k by a jittered loop still pair with the read k cycles back.
func (h *history) slack() time.Duration { return h.window / 10 }

// add appends one read of all servers taken at at, forgets the servers missing
// from it (one that comes back starts again), restarts the history of a server
// whose counter went down (returned, sorted) and drops reads no rate needs.
func (h *history) add(reads map[string]read, at time.Time) (reset []string) {
	for name := range h.servers {
		if _, ok := reads[name]; !ok {
			delete(h.servers, name)
		}
	}
	keepFrom := at.Add(-h.window + h.slack())
	for name, r := range reads {
		rs := h.servers[name]
		if n := len(rs); n > 0 && r.counter < rs[n-1].counter {
			reset = append(reset, name)
			rs = rs[:0]
		}
		rs = append(rs, r)
		if i := baseIndex(rs, keepFrom); i > 0 {
			rs = slices.Delete(rs, 0, i)
		}
		h.servers[name] = rs
	}
	slices.Sort(reset)
	return reset
}

// baseIndex is the index of the newest read, before the last one, taken at or
// before cutoff, or -1 if there is none.
func baseIndex(rs []read, cutoff time.Time) int {
	for i := len(rs) - 2; i >= 0; i-- {
		if !rs[i].at.After(cutoff) {
			return i
		}
	}
	return -1
}

// rates returns one point per server read at now whose reads span the window
// (or minSpan while they do not yet span it): the counter's rate over the
// span, per mean open session when perConn.
func (h *history) rates(now time.Time, perConn bool) weighter.Loads {
	loads := make(weighter.Loads, len(h.servers))
	for name, rs := range h.servers {
		last := rs[len(rs)-1]
		if !last.at.Equal(now) {
			continue
		}
		i := baseIndex(rs, now.Add(-h.window+h.slack()))
		if i < 0 && len(rs) > 1 && now.Sub(rs[0].at) >= h.minSpan {
			i = 0 // sample_interval allows a span shorter than the window
		}
		if i < 0 {
			continue
		}
		span := now.Sub(rs[i].at).Seconds()
		if span <= 0 {
			continue
		}
		rate := float64(last.counter-rs[i].counter) / span
		if perConn {
			rate = perConnection(rate, rs[i:])
		}
		loads[name] = weighter.Series{{Time: now, Value: rate}}
	}
	return loads
}

// perConnection divides rate by the time-weighted mean of the sessions open at
// the reads it was computed from (with two reads, their mean). With no session
// at any of them the server is empty, the lightest there is: 0, whatever short
// connections came and went in between.
func perConnection(rate float64, rs []read) float64 {
	var area, span float64
	for i := 1; i < len(rs); i++ {
		dt := rs[i].at.Sub(rs[i-1].at).Seconds()
		area += (float64(rs[i-1].sessions) + float64(rs[i].sessions)) / 2 * dt
		span += dt
	}
	if area == 0 || span == 0 {
		return 0
	}
	return rate / (area / span)
}
