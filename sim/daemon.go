package sim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/assemble"
	"github.com/haproxy-weighter/haproxy-weighter/config"
	"github.com/haproxy-weighter/haproxy-weighter/internal/ownzero"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// The simulator runs the daemon's own cycle (weighter.RunCycle over a
// weighter.Fresh built from the configuration's settings, the Controller and
// the Shedder) on every simulated balancer. What stands where HAProxy and the
// monitoring system stand is in this file: a fast reader over the simulated
// connections (simReader, and peeredReader for `peers:`), the backend as a
// weighter.Target and SessionCloser (simTarget), and the external metric as a
// weighter.Source (externalSource, asyncExternal).

// bytesPerLine is what one unit of the model's load (a line, a datapoint)
// is in bytes on the wire: the fast signal counts bytes, as HAProxy does, so
// the calibration and the shed planner see the daemon's unit (bytes/s).
const bytesPerLine = 100

// simBackend is the name of the daemon's backend in the model.
const simBackend = "be_sim"

// simTarget is one balancer's HAProxy backend as the daemon sees it: every
// server with its state and weight (a removed server is down), weights
// written as HAProxy's `set weight` takes them (integers 0..256, known
// servers), and sessions closed as `shutdown session` does.
type simTarget struct {
	b *backend
	// close ends connection id now; its client comes back after a delay.
	close func(id int)
	// zeroes is the record of the weight-0 writes of this balancer's
	// daemon, kept as the daemon's writers keep theirs (internal/ownzero),
	// so that the Controller tells its own drains from others' the same way.
	zeroes ownzero.Record
}

var (
	_ weighter.Target        = (*simTarget)(nil)
	_ weighter.SessionCloser = (*simTarget)(nil)
	_ weighter.PinTarget     = (*simTarget)(nil)
)

// pinTableSize is the model's stick table's size (`size 100k`, as
// docs and the reference configuration declare it).
const pinTableSize = 102400

// Pins reads the backend's stick table, as `show table` lists it: every
// entry with the server it names, by client address; an error wrapping
// weighter.ErrNoPinTable when the backend has none.
func (t *simTarget) Pins(context.Context) (weighter.PinTable, error) {
	if t.b.pins == nil {
		return weighter.PinTable{}, fmt.Errorf("backend %s: %w", simBackend, weighter.ErrNoPinTable)
	}
	out := weighter.PinTable{Name: simBackend, Size: pinTableSize, Used: len(t.b.pins)}
	clients := make([]int, 0, len(t.b.pins))
	for c := range t.b.pins {
		clients = append(clients, c)
	}
	slices.Sort(clients)
	for _, c := range clients {
		out.Pins = append(out.Pins, weighter.Pin{Client: clientIP(c), Server: t.b.servers[t.b.pins[c]].name})
	}
	return out, nil
}

// SetWeightsAndPins writes, as HAProxy takes one batch, pins.Clear (`clear
// table … key`), then the weights, then pins.Set (`set table … data.server_id`):
// a write HAProxy would refuse fails alone (an unknown client address or
// server, a full table), the others are written.
func (t *simTarget) SetWeightsAndPins(ctx context.Context, changes []weighter.Change, pins weighter.PinChanges) error {
	var errs []error
	if t.b.pins == nil && !pins.Empty() {
		errs = append(errs, fmt.Errorf("backend %s: %w", simBackend, weighter.ErrNoPinTable))
		pins = weighter.PinChanges{}
	}
	for _, addr := range pins.Clear {
		c, ok := parseClientIP(addr)
		if !ok {
			errs = append(errs, &weighter.PinError{Client: addr, Err: errors.New("not a client address of the model")})
			continue
		}
		delete(t.b.pins, c) // clearing a missing key is no error, as in HAProxy
	}
	if err := t.SetWeights(ctx, changes); err != nil {
		errs = append(errs, err)
	}
	for _, p := range pins.Set {
		c, ok := parseClientIP(p.Client)
		i := serverIndex(t.b.servers, p.Server)
		_, had := t.b.pins[c]
		switch {
		case !ok:
			errs = append(errs, &weighter.PinError{Client: p.Client, Err: errors.New("not a client address of the model")})
		case i < 0:
			errs = append(errs, &weighter.PinError{Client: p.Client, Err: fmt.Errorf("no server %q", p.Server)})
		case !had && len(t.b.pins) >= pinTableSize:
			errs = append(errs, &weighter.PinError{Client: p.Client, Err: weighter.ErrPinTableFull})
		default:
			t.b.pins[c] = i
		}
	}
	return errors.Join(errs...)
}

// Servers lists every server, as `show servers state` would.
func (t *simTarget) Servers(context.Context) ([]weighter.ServerState, error) {
	sent := t.zeroes.ReadSent()
	out := make([]weighter.ServerState, 0, len(t.b.servers))
	for i, s := range t.b.servers {
		op := "up"
		if !s.up {
			op = "down"
		}
		st := weighter.ServerState{Name: s.name, Address: serverAddress(i), Weight: s.weight,
			InitialWeight: initialWeight, Admin: weighter.AdminReady, Operational: op, Sessions: s.active}
		if s.weight != 0 {
			t.zeroes.Seen(t.zeroKey(s.name), sent)
		} else {
			st.OwnZero = t.zeroes.Ours(t.zeroKey(s.name))
		}
		out = append(out, st)
	}
	return out, nil
}

// zeroKey is a server's key in the record of the daemon's weight-0 writes.
func (t *simTarget) zeroKey(server string) ownzero.Key {
	return ownzero.Key{Target: "sim", Group: simBackend, Server: server}
}

// SetWeights writes the changes; one HAProxy would refuse fails alone, as a
// *weighter.ServerError, and the others are written.
func (t *simTarget) SetWeights(_ context.Context, changes []weighter.Change) error {
	var errs []error
	for _, ch := range changes {
		i := serverIndex(t.b.servers, ch.Server)
		switch {
		case i < 0:
			errs = append(errs, &weighter.ServerError{Server: ch.Server, Err: errors.New("no such server")})
		case !weighter.ValidWeight(ch.Weight):
			errs = append(errs, &weighter.ServerError{Server: ch.Server, Err: fmt.Errorf("weight %d out of 0..%d", ch.Weight, weighter.MaxWeight)})
		default:
			t.b.setWeight(i, ch.Weight)
			t.zeroes.Wrote(t.zeroKey(ch.Server), ch.Weight)
		}
	}
	return errors.Join(errs...)
}

// CloseSession closes the listed session if it is still open on the server
// it was listed on.
func (t *simTarget) CloseSession(_ context.Context, s weighter.ShedSession) error {
	id, ok := connID(s)
	if !ok || id >= len(t.b.conns) {
		return fmt.Errorf("session %s: %w", s.ID, weighter.ErrSessionGone)
	}
	c := t.b.conns[id]
	if !c.open || t.b.servers[c.server].name != s.Server {
		return fmt.Errorf("session %s: %w", s.ID, weighter.ErrSessionGone)
	}
	t.close(id)
	return nil
}

// serverAddress is server i's address, as HAProxy would list it.
func serverAddress(i int) string { return fmt.Sprintf("10.0.%d.%d:80", i/250, i%250+1) }

// A connection's session: its stream id and serial are its index + 1.
func sessionOf(id int) (string, uint64) {
	return "0x" + strconv.FormatUint(uint64(id)+1, 16), uint64(id) + 1
}

func connID(s weighter.ShedSession) (int, bool) {
	n, err := strconv.ParseUint(strings.TrimPrefix(s.ID, "0x"), 16, 64)
	if err != nil || n == 0 || n != s.Serial {
		return 0, false
	}
	return int(n) - 1, true
}

// clientIP is a client's IP address (what a stick table of type ip keys
// on): one per client (arrival), so that the shed cooldown, which is per
// IP, and a pin follow the client; a session's client address adds a port.
// Built without fmt: a reader that lists 20,000 sessions every cycle calls
// it for each.
func clientIP(client int) string {
	b := make([]byte, 0, 15)
	b = append(b, "10."...)
	b = strconv.AppendInt(b, int64(client>>16&255), 10)
	b = append(b, '.')
	b = strconv.AppendInt(b, int64(client>>8&255), 10)
	b = append(b, '.')
	b = strconv.AppendInt(b, int64(client&255), 10)
	return string(b)
}

// parseClientIP is the client of an address clientIP made.
func parseClientIP(addr string) (int, bool) {
	var a, b, c, d int
	if n, err := fmt.Sscanf(addr, "%d.%d.%d.%d", &a, &b, &c, &d); err != nil || n != 4 || a != 10 ||
		b < 0 || b > 255 || c < 0 || c > 255 || d < 0 || d > 255 || clientIP(b<<16|c<<8|d) != addr {
		return 0, false
	}
	return b<<16 | c<<8 | d, true
}

// fastRead is one read of a server's fast signal on one balancer.
type fastRead struct {
	t       float64
	counter float64 // cumulative local datapoints as the signal shows them
	connSec float64 // cumulative session-seconds as the signal measures them
	scur    int
	lagScur int // scur one contstats tick earlier (LagSessions)
}

// simReader is a balancer's fast local signal as HAProxy reports it (the
// weighter.LocalReader the daemon's haproxy reader is): per server, the
// cumulative bytes, their rate since the previous read (or over the
// pipeline's fast window) and the mean open connections over the same span;
// with shedding, the open connections with their own rates in bytes/s,
// measured between two reads. The signal is the scenario's or the
// pipeline's: live (`show sess all`), contstats or closed (`show stat`).
type simReader struct {
	m      *model
	lb     *balancer
	signal string
	window float64 // fast window, seconds (the interval unless the pipeline says)
	keep   float64 // reads kept per server, seconds
	lag    bool    // LagSessions
	open   bool    // list the open connections (the daemon does with a shed block)
	// clients lists the clients, each address's rate and connections (the
	// daemon's kernel reader does for a backend that pins).
	clients bool
	ips     map[int]string // the clients' addresses, made once (ip)

	reads  [][]fastRead // per server, oldest first
	lastAt float64      // the previous read's time, -1 before the first
	// lost is per server the datapoints of connections a restart closed
	// that no read saw: what they sent since the read before the restart.
	// A restarted HAProxy's sockets go with its process, and the socket
	// table's reader (like `show sess all`'s) counts only what it saw of a
	// connection, so the first read after a restart misses them (on a real
	// HAProxy 2.6 it saw 8-62 % of the servers' rates before the restart).
	// Live signal only: a restart's reset of `show stat`'s counters
	// (contstats, closed) is not modelled.
	lost []float64
	// published are the newest reads, as the daemon publishes them to its
	// peers: per server, rate (bytes/s) and mean sessions.
	published []published
}

// published is one read as a peer fetches it.
type published struct {
	t       float64
	servers map[string]peerServer
}

type peerServer struct{ rate, sessions float64 }

var _ weighter.LocalReader = (*simReader)(nil)

func newSimReader(m *model, lb *balancer, pl Pipeline) *simReader {
	r := &simReader{m: m, lb: lb, signal: m.signal, window: pl.fastWindow(m.sc), lag: pl.LagSessions, lastAt: -1}
	r.keep = math.Max(r.window, pl.interval(m.sc).Seconds()) + 1e-9
	return r
}

// ReadLocal reads the named servers' signal at the model's time.
func (r *simReader) ReadLocal(_ context.Context, servers []weighter.ServerState) (weighter.LocalRead, error) {
	now := r.m.now
	b := r.lb.b
	out := weighter.LocalRead{At: simTime(epoch, now), Servers: make(map[string]weighter.LocalCounter, len(servers)), Streams: b.departing.Len()}
	if r.lastAt >= 0 {
		out.Since = simTime(epoch, r.lastAt)
	}
	pending := r.pending(now)
	pub := published{t: now, servers: map[string]peerServer{}}
	for _, name := range weighter.Names(servers) {
		i := serverIndex(b.servers, name)
		if i < 0 {
			out.Servers[name] = weighter.LocalCounter{Reset: true}
			continue
		}
		rs := r.record(i, now, pending[i])
		c := weighter.LocalCounter{Bytes: rs[len(rs)-1].counter * bytesPerLine, Reset: true}
		if load, sess, ok := over(rs, r.window); ok {
			c.Rate, c.Sessions, c.Reset = load*bytesPerLine, sess, false
			pub.servers[name] = peerServer{rate: c.Rate, sessions: c.Sessions}
		}
		out.Servers[name] = c
	}
	if r.open {
		out.Open = r.openSessions(now)
	}
	if r.clients {
		out.Clients = r.clientRates()
	}
	r.lastAt = now
	r.published = append(r.published, pub)
	if len(r.published) > 8 {
		r.published = r.published[1:]
	}
	return out, nil
}

// lostOf is server i's datapoints no read will see (lost).
func (r *simReader) lostOf(i int) float64 {
	if i < len(r.lost) {
		return r.lost[i]
	}
	return 0
}

// closedUnseen records that a connection of rate on server i, on it since
// joined, closed at now without a read seeing its last datapoints: those
// since the previous read (or since it joined, when later).
func (r *simReader) closedUnseen(i int, rate, joined, now float64) {
	for len(r.lost) <= i {
		r.lost = append(r.lost, 0)
	}
	r.lost[i] += rate * max(now-max(joined, r.lastAt), 0)
}

// serverIndex is the index of the named server, -1 when there is none.
func serverIndex(servers []*server, name string) int {
	return slices.IndexFunc(servers, func(s *server) bool { return s.name == name })
}

// pending is per server the datapoints its open connections sent that the
// signal does not show yet (contstats: since their last tick; closed: all).
func (r *simReader) pending(now float64) []float64 {
	b := r.lb.b
	out := make([]float64, len(b.servers))
	if r.signal == SignalLive {
		return out
	}
	for _, d := range b.departing {
		c := b.conns[d.id]
		age := now - r.lb.since[d.id]
		if r.signal == SignalContstats {
			age = math.Mod(age, contstatsTick)
		}
		out[c.server] += c.rate * age
	}
	return out
}

// record appends server i's read at now to its reads and returns them.
func (r *simReader) record(i int, now, pending float64) []fastRead {
	b := r.lb.b
	for len(r.reads) <= i {
		r.reads = append(r.reads, nil)
	}
	rd := fastRead{t: now, counter: b.counter(i, now) - pending - r.lostOf(i), scur: b.servers[i].active}
	rs := r.reads[i]
	switch {
	case r.signal == SignalLive:
		rd.connSec = b.connSeconds(i, now)
	case len(rs) > 0:
		p := rs[len(rs)-1]
		rd.connSec = p.connSec + float64(p.scur+rd.scur)/2*(now-p.t)
		if r.lag && r.signal == SignalContstats {
			// Count the sessions of one contstats tick ago: a connection
			// shows no bytes before its first tick.
			lag := rd.scur
			for _, q := range rs {
				if q.t <= now-contstatsTick+1e-9 {
					lag = q.scur
				}
			}
			rd.connSec = p.connSec + float64(p.lagScur+lag)/2*(now-p.t)
			rd.lagScur = lag
		}
	}
	rs = append(rs, rd)
	cut := 0
	for cut < len(rs)-2 && now-rs[cut+1].t >= r.keep {
		cut++
	}
	r.reads[i] = append(rs[:0], rs[cut:]...)
	return r.reads[i]
}

// over is the load and mean open connections over the window w ending at
// the newest read; false before two reads exist.
func over(rs []fastRead, w float64) (load, sessions float64, ok bool) {
	if len(rs) < 2 {
		return 0, 0, false
	}
	r1, r0 := rs[len(rs)-1], rs[0]
	for _, r := range rs {
		if r.t <= r1.t-w+1e-9 {
			r0 = r
		}
	}
	dt := r1.t - r0.t
	return (r1.counter - r0.counter) / dt, (r1.connSec - r0.connSec) / dt, true
}

// openSessions are the balancer's open connections, each with its rate in
// bytes/s when it was open at the previous read too (a stream seen in one
// read has no rate yet; the model's rates are constant, so two reads of its
// totals give it exactly).
func (r *simReader) openSessions(now float64) []weighter.ShedSession {
	b := r.lb.b
	out := make([]weighter.ShedSession, 0, b.departing.Len())
	for _, d := range b.departing {
		c := b.conns[d.id]
		rate := math.NaN()
		if r.lastAt >= 0 && r.lb.since[d.id] <= r.lastAt+1e-9 {
			rate = c.rate * bytesPerLine
		}
		id, serial := sessionOf(d.id)
		out = append(out, weighter.ShedSession{ID: id, Serial: serial, Server: b.servers[c.server].name,
			Client: r.ip(r.lb.client[d.id]) + ":" + strconv.Itoa(1024+d.id%60000), // one IP per client, a port per connection
			Age:    seconds2d(now - r.lb.since[d.id]), Rate: rate})
	}
	return out
}

// clientRates are the balancer's clients with open connections, by
// address: each one's connections and the sum of their rates in bytes/s as
// the kernel reader measures them, two reads of a socket's totals apart (a
// connection new since the previous read has none yet; a client all of whose
// connections are new has NaN).
func (r *simReader) clientRates() []weighter.Client {
	b := r.lb.b
	type one struct {
		client   int
		rate     float64
		measured bool
	}
	conns := make([]one, 0, b.departing.Len())
	for _, d := range b.departing {
		c := b.conns[d.id]
		o := one{client: c.client}
		if r.lastAt >= 0 && r.lb.since[d.id] <= r.lastAt+1e-9 {
			o.rate, o.measured = c.rate*bytesPerLine, true
		}
		conns = append(conns, o)
	}
	slices.SortFunc(conns, func(a, b one) int { return a.client - b.client })
	out := []weighter.Client{} // listed, none open: not nil, which says "not listed"
	for k := 0; k < len(conns); {
		cl := weighter.Client{Addr: r.ip(conns[k].client)}
		measured := false
		for at := conns[k].client; k < len(conns) && conns[k].client == at; k++ {
			cl.Rate += conns[k].rate
			cl.Conns++
			measured = measured || conns[k].measured
		}
		if !measured {
			cl.Rate = math.NaN()
		}
		out = append(out, cl)
	}
	return out
}

// ip is a client's address, made once per client and reader.
func (r *simReader) ip(client int) string {
	if r.ips == nil {
		r.ips = map[int]string{}
	}
	a, ok := r.ips[client]
	if !ok {
		a = clientIP(client)
		r.ips[client] = a
	}
	return a
}

func seconds2d(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// peeredReader is the daemon's reader with its peers' readings added, as
// package peers' Reader adds them (its HTTP polling cannot run in simulated
// time, so the model stands in for it): each peer's newest published read
// that a poll every quarter interval has fetched by now (made at least a
// poll before now) adds its rate and sessions to each server's, and its rate
// over the own read's span to the byte counter.
type peerReadings struct {
	own   *simReader
	peers []*simReader
	poll  float64 // seconds
	added map[string]float64
	last  float64
}

var _ weighter.LocalReader = (*peerReadings)(nil)

func (p *peerReadings) ReadLocal(ctx context.Context, servers []weighter.ServerState) (weighter.LocalRead, error) {
	cur, err := p.own.ReadLocal(ctx, servers)
	if err != nil {
		return cur, err
	}
	now := p.own.m.now
	var got []published
	for _, peer := range p.peers {
		for k := len(peer.published) - 1; k >= 0; k-- {
			if peer.published[k].t <= now-p.poll+1e-9 {
				got = append(got, peer.published[k])
				break
			}
		}
	}
	span := 0.0
	if !cur.Since.IsZero() && now > p.last {
		span = cur.At.Sub(cur.Since).Seconds()
		p.last = now
	}
	cur.Peers = fmt.Sprintf("peers %d of %d added", len(got), len(p.peers))
	for name, c := range cur.Servers {
		rate, sess := 0.0, 0.0
		for _, g := range got {
			s := g.servers[name]
			rate, sess = rate+s.rate, sess+s.sessions
		}
		p.added[name] += rate * span
		c.Bytes += p.added[name]
		if !c.Reset {
			c.Rate += rate
			c.Sessions += sess
		}
		cur.Servers[name] = c
	}
	return cur, nil
}

// errOutage is the external source's answer during the scenario's outage.
var errOutage = errors.New("connection refused (the scenario's external outage)")

// externalSource is the monitoring system (Prometheus, Graphite) as the
// daemon's source reads it: per server, the newest rate points of its true
// load visible at the model's time.
type externalSource struct{ m *model }

func (e externalSource) Fetch(context.Context, []weighter.ServerState) (weighter.Loads, error) {
	now := e.m.now
	if o := e.m.sc.ExternalOutage; o != nil && now >= o.From.Seconds() && now < o.To.Seconds() {
		return nil, errOutage
	}
	return e.m.external(now), nil
}

// asyncExternal answers as the daemon's background fetch of a calibrating
// source does (fastsignal/async.go, a weighter.BackgroundSource): the Fresh
// starts a fetch when its refresh says (Start) and takes the answer in a
// later cycle (Take). A remote answers within the model's step, so a fetch
// started before now has ended by now; only the first Take waits for its
// own fetch.
type asyncExternal struct {
	src weighter.Source
	now func() float64

	pending   *weighter.Answer // the fetch in flight, started at pendingAt
	pendingAt float64
	ready     *weighter.Answer // ended, not taken yet
	taken     bool
}

var _ weighter.BackgroundSource = (*asyncExternal)(nil)

func (a *asyncExternal) Fetch(ctx context.Context, servers []weighter.ServerState) (weighter.Loads, error) {
	return a.src.Fetch(ctx, servers)
}

// Start fetches now, as the background fetch would when it began, unless a
// fetch is in flight.
func (a *asyncExternal) Start(servers []weighter.ServerState) {
	a.settle()
	if a.pending == nil {
		l, err := a.src.Fetch(context.Background(), servers)
		a.pending, a.pendingAt = &weighter.Answer{Loads: l, Err: err}, a.now()
	}
}

// Take hands over the answer of a fetch that has ended (the first waits for
// its own).
func (a *asyncExternal) Take(context.Context) (weighter.Answer, bool, error) {
	a.settle()
	if !a.taken && a.ready == nil && a.pending != nil {
		a.ready, a.pending = a.pending, nil
	}
	if a.ready == nil {
		return weighter.Answer{}, false, nil
	}
	got := *a.ready
	a.ready, a.taken = nil, true
	return got, true, nil
}

// settle ends a fetch started before now.
func (a *asyncExternal) settle() {
	if a.pending != nil && a.now() > a.pendingAt {
		a.ready, a.pending = a.pending, nil
	}
}

// daemonConfig is the daemon's configuration of one backend weighted as
// the README's quick start sets it up (a Prometheus source whose query's
// range is the model's rate window), parsed by package config, so that the
// simulator takes every default (interval, calibration, refresh, policy)
// where the daemon takes it.
func daemonConfig(rateWindow time.Duration) (time.Duration, config.Backend, error) {
	yaml := fmt.Sprintf(`haproxy: {socket: /run/haproxy/admin.sock}
backends:
  - name: %s
    source:
      prometheus: {url: "http://127.0.0.1:9090", query: "rate(lines_received_total[%ds])", server_label: server}
`, simBackend, int(math.Round(rateWindow.Seconds())))
	cfg, err := config.Parse("simulated daemon", []byte(yaml), nil)
	if err != nil {
		return 0, config.Backend{}, fmt.Errorf("the simulated daemon's configuration: %w", err)
	}
	return time.Duration(cfg.Interval), cfg.Backends[0], nil
}

// newDaemons gives every balancer its daemon, assembled where the daemon
// assembles its backends (package assemble) from the daemon's configuration
// for the scenario's metric, with the pipeline's research variations
// (daemonCandidate): its Controller; as its Source the fresh pipeline over
// the balancer's fast reader (with its peers' readings when the pipeline is
// fleet-wide) and the external source, answered in the background when it
// calibrates, or the external source alone (InputExternal, `fast_signal:
// off`); and a Shedder when the pipeline sheds.
func (m *model) newDaemons() error {
	pl := m.pl
	b, research, err := pl.daemonCandidate(m.sc)
	if err != nil {
		return err
	}
	if pl.Input != InputExternal {
		for _, lb := range m.lbs {
			lb.reader = newSimReader(m, lb, pl)
			// The daemon lists the open connections for shedding and for
			// pinning (where a client sits is matched from them), and the
			// clients for pinning.
			lb.reader.open = pl.Shed != nil || pl.Pin != nil
			lb.reader.clients = pl.Pin != nil
		}
	}
	for _, lb := range m.lbs {
		parts := assemble.Parts{Target: &simTarget{b: lb.b, close: func(id int) { m.shedConn(lb, id, m.now) }},
			Source: externalSource{m},
			Now:    func() time.Time { return simTime(epoch, m.now) },
			Sleep:  func(context.Context, time.Duration) error { return nil }, // simulated time: nothing waits
		}
		if lb.reader != nil {
			parts.Fast = lb.reader
			parts.Peers = m.peersOf(lb)
		}
		if !pl.SyncExternal {
			parts.Background = func(src weighter.Source, _ time.Duration) weighter.Source {
				return &asyncExternal{src: src, now: func() float64 { return m.now }}
			}
		}
		a, err := assemble.Candidate(b, parts, research)
		if err != nil {
			return err
		}
		lb.daemon = a.Backend
	}
	return nil
}

// peersOf adds the other balancers' readings to lb's when the pipeline is
// fleet-wide (nil: lb's own alone).
func (m *model) peersOf(lb *balancer) func(weighter.LocalReader) weighter.LocalReader {
	if !m.pl.FleetWide || len(m.lbs) < 2 {
		return nil
	}
	return func(weighter.LocalReader) weighter.LocalReader { // lb's own reader: lb.reader
		pr := &peerReadings{own: lb.reader, poll: peerPoll * m.interval.Seconds(), added: map[string]float64{}}
		for _, other := range m.lbs {
			if other != lb {
				pr.peers = append(pr.peers, other.reader)
			}
		}
		return pr
	}
}

// daemonCandidate is the daemon's configuration for the scenario's external
// metric (daemonConfig) and what the pipeline changes of it: its input,
// calibration mode, refresh and policy.
func (pl Pipeline) daemonCandidate(sc Scenario) (config.Backend, assemble.Research, error) {
	_, b, err := daemonConfig(sc.RateWindow)
	if err != nil {
		return config.Backend{}, assemble.Research{}, err
	}
	policy := pl.Policy
	if pl.Shipped {
		policy = b.Policy
	}
	if pl.Adjust != nil {
		pl.Adjust(&policy)
	}
	return b, assemble.Research{Policy: &policy, Shed: pl.Shed, Pin: pl.Pin, Settings: func(s *weighter.FreshSettings) {
		s.Calibrate = pl.Input == InputCalibrated
		if pl.Calibration.Mode != "" {
			cp := pl.Calibration
			cp.Window = s.Calibration.Window
			s.Calibration = cp
		}
		if pl.Refresh > 0 {
			s.Refresh = pl.Refresh
		}
	}}, nil
}

// interval is the pipeline's daemon interval: its own, the configuration's
// default for the shipped pipeline, else the scenario's.
func (pl Pipeline) interval(sc Scenario) time.Duration {
	switch {
	case pl.Interval > 0:
		return pl.Interval
	case pl.Shipped:
		if d, _, err := daemonConfig(sc.RateWindow); err == nil {
			return d
		}
	}
	return sc.Interval
}
