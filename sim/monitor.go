package sim

import (
	"math"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// seriesPoints is how many of the newest rate points the weighter is given per
// server, as a render or range query over the last minute would return.
const seriesPoints = 6

// sample is one scrape of a server's counter.
type sample struct {
	t, counter, connSec float64
}

// meter is what a monitoring system scrapes and an agent on a server reads:
// each server's cumulative true load (its counter) and open
// connection-seconds. The model is one (every balancer's connections, with
// the servers' costs and background); so is a lone backend (a test's).
type meter interface {
	serverList() []*server
	counter(i int, now float64) float64
	connSeconds(i int, now float64) float64
}

// monitor models the monitoring pipeline between the servers and the weighter: a
// scrape (Prometheus) or bucket (Graphite) every resolution, a rate over a window
// of those samples, and an ingestion delay before a point can be read.
type monitor struct {
	window  float64 // rate window, seconds
	delay   float64
	perConn bool       // report load per open connection instead of load
	samples [][]sample // per server, oldest first
}

func newMonitor(sc Scenario) *monitor {
	return &monitor{window: sc.RateWindow.Seconds(), delay: sc.Delay.Seconds()}
}

// scrape records every up server's counter at now.
func (m *monitor) scrape(src meter, now float64) {
	servers := src.serverList()
	for len(m.samples) < len(servers) {
		m.samples = append(m.samples, nil)
	}
	for i, s := range servers {
		if s.up {
			m.samples[i] = append(m.samples[i], sample{t: now, counter: src.counter(i, now), connSec: src.connSeconds(i, now)})
		}
	}
}

// loads is what the weighter's source would return at now: per up server, the
// newest rate points visible by then (a server with one sample has none yet).
func (m *monitor) loads(src meter, now float64, epoch time.Time) weighter.Loads {
	servers := src.serverList()
	out := make(weighter.Loads, len(servers))
	for i, s := range servers {
		if !s.up || i >= len(m.samples) {
			continue
		}
		out[s.name] = m.series(m.samples[i], now, epoch)
	}
	return out
}

// series turns counter samples into rate points: at each sample, the increase
// since the oldest sample inside the rate window, per second.
func (m *monitor) series(samples []sample, now float64, epoch time.Time) weighter.Series {
	var ser weighter.Series
	last := len(samples) - 1
	for last >= 0 && samples[last].t+m.delay > now+1e-9 {
		last--
	}
	for k := max(1, last-seriesPoints+1); k <= last; k++ {
		j := k - 1
		for j > 0 && samples[k].t-samples[j-1].t <= m.window+1e-9 {
			j--
		}
		v := (samples[k].counter - samples[j].counter) / (samples[k].t - samples[j].t)
		if m.perConn {
			conns := (samples[k].connSec - samples[j].connSec) / (samples[k].t - samples[j].t)
			v = perConnection(v, conns)
		}
		ser = append(ser, weighter.Point{Time: simTime(epoch, samples[k].t), Value: v})
	}
	return ser
}

// simTime converts simulated seconds to a wall time after epoch.
func simTime(epoch time.Time, t float64) time.Time {
	return epoch.Add(time.Duration(math.Round(t * float64(time.Second))))
}

// perConnection is a server's load divided by its mean open connections over the
// same window: rate(datapoints[w]) / avg_over_time(haproxy_server_current_sessions[w]).
// A server without connections counts as carrying one, so it looks light, not unknown.
func perConnection(load, conns float64) float64 {
	return load / math.Max(conns, 1)
}
