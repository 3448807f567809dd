package sim

import (
	"container/heap"
	"fmt"
	"math"
	"slices"
)

// conn is one open (or closed) connection of a client (an address: the
// index of the arrival that brought it, kept when it reconnects).
type conn struct {
	rate   float64
	end    float64
	server int
	open   bool
	client int
}

// picker chooses the server for a new connection, -1 when none is eligible.
type picker func(servers []*server) int

// backend is the simulated HAProxy backend: servers, connections, placement.
type backend struct {
	servers   []*server
	conns     []conn
	departing departures
	pick      picker
	seq       uint64  // leastconn requeue order
	fallbacks int     // connections placed while no server had a weight
	drifts    []drift // changes of rate to come, by time
	// pins is the backend's stick table (`stick-table type ip` with `stick
	// match src`): client → server index; nil when the backend has none.
	// HAProxy creates no entry itself (match only): the daemon writes them.
	pins map[int]int
	// stuck counts the connections a pin placed (stick match hits).
	stuck int
}

func newBackend(n, weight int, pick picker) *backend {
	b := &backend{pick: pick}
	for range n {
		b.addServer(weight, 0)
	}
	return b
}

// addServer adds an empty server, named s1, s2, ... in order.
func (b *backend) addServer(weight int, now float64) {
	b.seq++
	b.servers = append(b.servers, &server{
		name: serverName(len(b.servers)), up: true, weight: weight, queued: b.seq, last: now,
	})
}

// serverName is the name of the server of index i: s1, s2, ...
func serverName(i int) string { return fmt.Sprintf("s%d", i+1) }

// serverList is the backend's servers (a meter: one balancer's own view).
func (b *backend) serverList() []*server { return b.servers }

// setWeight changes a server's weight; HAProxy requeues it in the leastconn tree.
func (b *backend) setWeight(i, w int) {
	s := b.servers[i]
	if s.weight == w {
		return
	}
	s.weight = w
	b.seq++
	s.queued = b.seq
}

// open places a new connection of client living until end.
func (b *backend) open(client int, rate, end, now float64) {
	b.openOn(b.choose(client), client, rate, end, now)
}

// openOn opens a connection of client on server i.
func (b *backend) openOn(i, client int, rate, end, now float64) {
	b.conns = append(b.conns, conn{rate: rate, end: end, server: i, open: true, client: client})
	heap.Push(&b.departing, departure{end: end, id: len(b.conns) - 1})
	b.servers[i].picked++
	b.attach(i, rate, now)
}

func (b *backend) attach(i int, rate, now float64) {
	s := b.servers[i]
	b.account(s, now)
	s.active++
	s.load += rate
	b.seq++
	s.queued = b.seq
}

func (b *backend) detach(i int, rate, now float64) {
	s := b.servers[i]
	b.account(s, now)
	s.active--
	s.load -= rate
	if s.active == 0 {
		s.load = 0 // no float residue on an empty server
	}
	b.seq++
	s.queued = b.seq
}

// account brings the server's counter (integral of load) up to now.
func (b *backend) account(s *server, now float64) {
	s.integ += s.load * (now - s.last)
	s.connSec += float64(s.active) * (now - s.last)
	s.last = now
}

// counter is the server's cumulative datapoints at now, what a monitoring system scrapes.
func (b *backend) counter(i int, now float64) float64 {
	s := b.servers[i]
	return s.integ + s.load*(now-s.last)
}

// connSeconds is the server's cumulative connection-seconds at now; its rate is the
// mean number of open connections (HAProxy's scur averaged over a window).
func (b *backend) connSeconds(i int, now float64) float64 {
	s := b.servers[i]
	return s.connSec + float64(s.active)*(now-s.last)
}

// closeUntil closes every connection that ends at or before t, and
// returns them.
func (b *backend) closeUntil(t float64) []int {
	var out []int
	for b.departing.Len() > 0 && b.departing[0].end <= t {
		d := heap.Pop(&b.departing).(departure)
		c := &b.conns[d.id]
		c.open = false
		b.detach(c.server, c.rate, d.end)
		out = append(out, d.id)
	}
	return out
}

// nextEnd is when the next connection closes (+Inf when none is open).
func (b *backend) nextEnd() float64 {
	if b.departing.Len() == 0 {
		return math.Inf(1)
	}
	return b.departing[0].end
}

// remove takes server i out; its clients reconnect at once and are placed anew,
// keeping their rate and remaining lifetime.
func (b *backend) remove(i int, now float64) {
	b.servers[i].up = false
	for id := range b.conns {
		c := &b.conns[id]
		if !c.open || c.server != i {
			continue
		}
		b.detach(i, c.rate, now)
		j := b.choose(c.client)
		c.server = j
		b.servers[j].picked++
		b.attach(j, c.rate, now)
	}
}

// choose is the server a new connection of client goes to, as HAProxy
// chooses it: the server its stick-table entry names when there is one and
// that server is up, EVEN IF drained or at weight 0 (HAProxy's persistence
// rule: a stick match beats the weights); else the balancing algorithm.
func (b *backend) choose(client int) int {
	if s, ok := b.pins[client]; ok && s < len(b.servers) && b.servers[s].up {
		b.stuck++
		return s
	}
	i := b.pick(b.servers)
	if i < 0 { // every weight is 0: HAProxy would queue; the model falls back to leastconn
		b.fallbacks++
		i = pickUnweighted(b.servers)
	}
	return i
}

// pickUnweighted is leastconn ignoring weights, for when every weight is 0.
func pickUnweighted(servers []*server) int {
	best := -1
	for i, s := range servers {
		if s.up && (best < 0 || s.active < servers[best].active) {
			best = i
		}
	}
	return best
}

// openLoad is the sum of the open connections' rates, computed from the
// connections themselves (for the conservation check).
func (b *backend) openLoad() float64 {
	sum := 0.0
	for _, c := range b.conns {
		if c.open {
			sum += c.rate
		}
	}
	return sum
}

// serverLoad is the sum of the servers' loads.
func (b *backend) serverLoad() float64 {
	sum := 0.0
	for _, s := range b.servers {
		sum += s.load
	}
	return sum
}

// drift is a connection's change of rate at a time.
type drift struct {
	at, rate float64
	id       int
}

// scheduleDrift sets connection id's rate to rate at at.
func (b *backend) scheduleDrift(id int, at, rate float64) {
	i, _ := slices.BinarySearchFunc(b.drifts, at, func(d drift, at float64) int {
		if d.at <= at { // equal times keep the order they were scheduled in
			return -1
		}
		return 1
	})
	b.drifts = slices.Insert(b.drifts, i, drift{at: at, rate: rate, id: id})
}

// nextDrift is when the next change of rate of an open connection falls
// (+Inf when none); the changes of closed connections are dropped.
func (b *backend) nextDrift() float64 {
	for len(b.drifts) > 0 && !b.conns[b.drifts[0].id].open {
		b.drifts = b.drifts[1:]
	}
	if len(b.drifts) == 0 {
		return math.Inf(1)
	}
	return b.drifts[0].at
}

// applyDrift changes the rate of the next drifting connection.
func (b *backend) applyDrift() {
	d := b.drifts[0]
	b.drifts = b.drifts[1:]
	c := &b.conns[d.id]
	s := b.servers[c.server]
	b.account(s, d.at)
	s.load += d.rate - c.rate
	c.rate = d.rate
}

type departure struct {
	end float64
	id  int
}

// departures is a min-heap of connection ends.
type departures []departure

func (d departures) Len() int           { return len(d) }
func (d departures) Less(i, j int) bool { return d[i].end < d[j].end }
func (d departures) Swap(i, j int)      { d[i], d[j] = d[j], d[i] }
func (d *departures) Push(x any)        { *d = append(*d, x.(departure)) }
func (d *departures) Pop() any {
	old := *d
	x := old[len(old)-1]
	*d = old[:len(old)-1]
	return x
}
