package weighter

import (
	"math"
	"time"
)

// sessionSample is the open connections a target reported for a server at one cycle.
type sessionSample struct {
	at time.Time
	n  int
}

// sessionSamples is how many cycles of session counts are kept per server:
// enough to look a few minutes back at the time of a delayed data point.
const sessionSamples = 64

// recordSessions keeps the session count of every server, so the count at the
// time of a delayed data point can be looked up later (connection_life only).
func recordSessions(now time.Time, ws []work) {
	for i := range ws {
		h := ws[i].mem.hist()
		h.sessions = append(h.sessions, sessionSample{at: now, n: ws[i].sessions})
		if len(h.sessions) > sessionSamples {
			h.sessions = append(h.sessions[:0], h.sessions[len(h.sessions)-sessionSamples:]...)
		}
	}
}

// sessionsAt is the mean session count in h during [at-span, at], else the
// last one before at, else fallback.
func sessionsAt(h []sessionSample, at time.Time, span time.Duration, fallback float64) float64 {
	sum, n := 0.0, 0
	before := -1
	for i, s := range h {
		if s.at.After(at) {
			break
		}
		before = i
		if !s.at.Before(at.Add(-span)) {
			sum, n = sum+float64(s.n), n+1
		}
	}
	switch {
	case n > 0:
		return sum / float64(n)
	case before >= 0:
		return float64(h[before].n)
	}
	return fallback
}

// pointTimes returns the time of the newest valid point of s (zero when there
// is none) and the gap to the valid point before it (0 when there is none).
func pointTimes(s Series) (at time.Time, span time.Duration) {
	for i := len(s) - 1; i >= 0; i-- {
		if !validLoad(s[i].Value) {
			continue
		}
		if at.IsZero() {
			at = s[i].Time
			continue
		}
		return at, at.Sub(s[i].Time)
	}
	return at, 0
}

// estimatePerConnection replaces the loads of the active servers by an estimate
// of their load per open connection now (connection_life > 0). A data point
// describes the connections a server had when it was taken; since then, with
// exponential lifetimes of mean life, a share s = exp(−age/life) of them is
// still open, and the others were replaced by connections of unknown rate,
// counted at the backend's mean rate per connection r̄:
//
//	load_now ≈ s·load + max(sessions_now − s·sessions_then, 0)·r̄
//
// and the function is fed load_now / sessions_now. Under leastconn, where
// servers hold connections in proportion to their weights, weights ∝
// connections/load are what equal loads need. The age of a point is measured
// to the middle of its rate window: rate_window, or when 0 the gap between the
// last two points (right for Graphite's perSecond, too short for a Prometheus
// rate over several scrapes).
func (c *Controller) estimatePerConnection(now time.Time, series Loads, active []*work, loads []float64) {
	life := time.Duration(c.p.ConnectionLife).Seconds()
	then := c.estimateBuf(len(active))
	sumL, sumC := 0.0, 0.0
	for i, w := range active {
		cur := float64(w.sessions)
		e := estimateInput{cur: cur, then: cur}
		if at, span := pointTimes(series[w.Server]); !at.IsZero() && w.valid() {
			if c.p.RateWindow > 0 {
				span = time.Duration(c.p.RateWindow)
			}
			e.then = sessionsAt(w.mem.hist().sessions, at, span, cur)
			e.age = max(now.Sub(at).Seconds()+span.Seconds()/2, 0)
		}
		then[i] = e
		sumL, sumC = sumL+loads[i], sumC+e.then
	}
	if sumC <= 0 {
		return // no connections known: weigh the loads as they are
	}
	rbar := sumL / sumC
	for i := range then {
		e := &then[i]
		s := math.Exp(-e.age / life)
		e.est = (s*loads[i] + math.Max(e.cur-s*e.then, 0)*rbar) / math.Max(e.cur, 1)
		if !validLoad(e.est) {
			return // loads near the float limit: weigh them as they are
		}
	}
	for i, e := range then {
		loads[i] = e.est
	}
}

// estimateInput is one server's session counts now and at its data point, the
// point's age, and the estimate.
type estimateInput struct{ cur, then, age, est float64 }

// estimateBuf returns the Controller's reused estimate buffer, n long.
func (c *Controller) estimateBuf(n int) []estimateInput {
	if cap(c.buf.estimate) < n {
		c.buf.estimate = make([]estimateInput, n)
	}
	c.buf.estimate = c.buf.estimate[:n]
	return c.buf.estimate
}
