package daemon

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"net"
	"net/http"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	promconfig "github.com/prometheus/common/config"

	"github.com/haproxy-weighter/haproxy-weighter/config"
	"github.com/haproxy-weighter/haproxy-weighter/sources"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// Peers: with several balancers in front of the same servers, each daemon
// sees only its own balancer's share of the fresh load; the others' reaches
// it through the external metric, 15-60 s late, while connections turn over
// every 30 s (docs/fresh-by-default.md: 47 % of the gap with its own signal,
// 80 % with every balancer's). So each daemon publishes its own per-server
// fast readings at PeerPath, fetches its peers' in the background, and adds
// the fresh ones to its own signal: rates and sessions summed per server,
// the peers' rates integrated into the byte counter its calibration takes.
// A peer that is down, slow, stale, answers garbage or is this daemon itself
// is left out, in the plan's reason, haproxy_weighter_peer_up and one log
// line per change.

// PeerPath is where a daemon serves its own fast readings to its peers.
const PeerPath = "/peer/fast"

// peerMaxRate and peerMaxSessions bound a peer's per-server reading: 1e12
// B/s is 8 Tbit/s, 1e9 sessions beyond any HAProxy's maxconn.
const (
	peerMaxRate     = 1e12
	peerMaxSessions = 1e9
)

// peerMaxBody bounds a peer's answer (a few hundred bytes per server).
const peerMaxBody = 4 << 20

// peerAnswer is what PeerPath serves: this daemon's own readings (never its
// peers'), per backend.
type peerAnswer struct {
	// Instance is a random id of the daemon process, so that a daemon listed
	// as its own peer is recognised and left out rather than counted twice.
	Instance string                     `json:"instance"`
	Backends map[string]peerBackendRead `json:"backends"`
}

// peerBackendRead is one backend's newest reading of its own balancer.
type peerBackendRead struct {
	// AgeSeconds is how old the reading was when served (the reader's clock:
	// the peer's clock is never compared with it).
	AgeSeconds float64 `json:"age_seconds"`
	// SpanSeconds is the span its rates and session means cover.
	SpanSeconds float64                   `json:"span_seconds"`
	Servers     map[string]peerServerRead `json:"servers"`
	// Connections: the backend is an IPVS service, whose fast signal counts
	// connections (bytes_per_second is then its mean open connections). A
	// reading in the other unit is left out, never added.
	Connections bool `json:"connections,omitempty"`
}

// peerServerRead is one server's fast reading on one balancer.
type peerServerRead struct {
	BytesPerSecond float64 `json:"bytes_per_second"`
	Sessions       float64 `json:"sessions"`
	// Address is the server's ip:port on that balancer, by which the
	// readings are matched (peerMatch); "" from a daemon that does not say.
	Address string `json:"address,omitempty"`
}

func (a *peerAnswer) validate() error {
	if a.Instance == "" {
		return errors.New("no instance")
	}
	bad := func(v float64) bool { return math.IsNaN(v) || math.IsInf(v, 0) || v < 0 }
	for name, b := range a.Backends {
		if bad(b.AgeSeconds) || bad(b.SpanSeconds) || b.SpanSeconds == 0 {
			return fmt.Errorf("backend %q: age %g s, span %g s", name, b.AgeSeconds, b.SpanSeconds)
		}
		for s, r := range b.Servers {
			// Beyond any server's, a rate added to the byte counter would
			// swamp the own bytes for good (float64 precision).
			if bad(r.BytesPerSecond) || bad(r.Sessions) || r.BytesPerSecond > peerMaxRate || r.Sessions > peerMaxSessions {
				return fmt.Errorf("backend %q server %q: %g B/s, %g sessions", name, s, r.BytesPerSecond, r.Sessions)
			}
		}
	}
	return nil
}

// ownRead is a backend's newest own reading, as published.
type ownRead struct {
	at      time.Time
	span    time.Duration
	servers map[string]peerServerRead
	counts  bool
}

// peerTiming is how often peers are asked and when a reading is too old.
type peerTiming struct {
	// Poll is the time between two asks of one peer: a quarter of the
	// interval, so that a reading reaches the other daemons well within a
	// cycle of it being made.
	Poll time.Duration
	// Timeout bounds one ask (half the interval): a slow peer is left out,
	// never waited for by a cycle, which only takes what was fetched.
	Timeout time.Duration
	// Interval is the daemon's: a reading older than 3 intervals (or twice
	// its own span, up to peerMaxSpan, when dumps are spaced wider) is stale.
	Interval time.Duration
}

func timingFor(interval time.Duration) peerTiming {
	return peerTiming{Poll: interval / 4, Timeout: interval / 2, Interval: interval}
}

// stale reports whether a reading age seconds old over span seconds is left
// out. In float seconds: a peer's numbers are not trusted to fit a Duration.
func (t peerTiming) stale(age, span float64) bool {
	return age > max(3*t.Interval.Seconds(), 2*min(span, peerMaxSpan.Seconds()))
}

// peerMaxSpan bounds the span that makes a peer's reading fresh for longer:
// dumps of 100,000 streams are a minute apart (haproxy.DefaultLocalBudget).
// A longer span is an outage (the first dump after an hour without one
// spans the hour), whose reading must not stay fresh for two hours when
// the peer's reads stop again; or a lie.
const peerMaxSpan = time.Minute

// peerSet is the daemon's side of peering: the readings it publishes and its
// peers' it fetches. It outlives reloads; set changes the peers.
type peerSet struct {
	instance string
	log      *slog.Logger
	now      func() time.Time

	up    *prometheus.GaugeVec // per peer: 1 when its readings are added
	added *prometheus.GaugeVec // per backend: peers added in the last cycle

	mu     sync.Mutex
	own    map[string]ownRead // per backend
	peers  map[string]*peer   // per URL
	timing peerTiming
	// client is how the peers are asked (peer_client, useClient); started
	// is what the running pollers were started with.
	client, started promconfig.HTTPClientConfig
}

func newPeerSet(reg prometheus.Registerer, log *slog.Logger) *peerSet {
	id := make([]byte, 8)
	_, _ = rand.Read(id) // never fails (crypto/rand)
	p := &peerSet{instance: hex.EncodeToString(id), log: log, now: time.Now,
		client: promconfig.DefaultHTTPClientConfig, started: promconfig.DefaultHTTPClientConfig,
		own: map[string]ownRead{}, peers: map[string]*peer{},
		up: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "haproxy_weighter_peer_up",
			Help: "1 when the peer's fresh readings are added to this daemon's fast signal, 0 when it is left out (down, slow, stale, garbage, itself)."}, []string{"peer"}),
		added: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "haproxy_weighter_backend_peers_added",
			Help: "Peers whose readings the backend's last cycle added to its own fast signal."}, []string{"backend"}),
	}
	reg.MustRegister(p.up, p.added)
	return p
}

// peer is one other daemon, fetched in the background.
type peer struct {
	url string
	// client asks it (peerclient.go); nil when it could not be built, and
	// then problem says why.
	client *sources.HTTPClient
	// credentials: the client sends some, which a 401 then refused.
	credentials bool
	// broken is why client could not be built.
	broken error
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	answer  *peerAnswer
	asked   time.Time // when the answer was asked for
	problem string    // why the peer is left out ("" = it is not)
	logged  string    // the problem the log last said ("" = fine)
	// The changes said since window began, and those left unsaid: a peer
	// that flaps is said peerLogChanges times, then summarised.
	window       time.Time
	said, unsaid int
	// stale is, per backend, whether the log last said its reading was stale.
	stale map[string]bool
}

// set starts polling the peers in urls and stops those no longer in it. ctx
// bounds every poller. It reports whether anything changed.
func (p *peerSet) set(ctx context.Context, urls []string, interval time.Duration) (changed bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	t := timingFor(interval)
	restart := t != p.timing || !reflect.DeepEqual(p.client, p.started)
	for u, pr := range p.peers {
		if !slices.Contains(urls, u) || restart {
			pr.stop()
			delete(p.peers, u)
			p.up.DeleteLabelValues(u)
			changed = true
		}
	}
	p.timing, p.started = t, p.client
	for _, u := range urls {
		if _, ok := p.peers[u]; ok {
			continue
		}
		changed = true
		pctx, cancel := context.WithCancel(ctx)
		pr := &peer{url: u, cancel: cancel, done: make(chan struct{}), problem: "not asked yet", logged: "not asked yet",
			stale: map[string]bool{}}
		pr.client, pr.credentials, pr.broken = newPeerClient(u, p.client, t.Timeout)
		p.peers[u] = pr
		p.up.WithLabelValues(u).Set(0)
		go p.poll(pctx, pr, t)
	}
	return changed
}

// stop ends every poller.
func (p *peerSet) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for u, pr := range p.peers {
		pr.stop()
		delete(p.peers, u)
	}
}

func (p *peerSet) poll(ctx context.Context, pr *peer, t peerTiming) {
	defer close(pr.done)
	for {
		p.fetch(ctx, pr, t)
		select {
		case <-ctx.Done():
			return
		case <-time.After(t.Poll):
		}
	}
}

// fetch asks one peer for its readings and keeps the answer, or why it is
// left out.
func (p *peerSet) fetch(ctx context.Context, pr *peer, t peerTiming) {
	asked := p.now()
	a, err := p.ask(ctx, pr, t.Timeout)
	if ctx.Err() != nil {
		return // stopped: not the peer's fault
	}
	pr.mu.Lock()
	switch {
	case err != nil:
		if pr.client != nil {
			// Garbage may echo what the peer was sent: the credentials.
			err = pr.client.Redact(err)
		}
		pr.answer, pr.problem = nil, clipProblem(err.Error())
	case a.Instance == p.instance:
		pr.answer, pr.problem = nil, "this daemon itself"
	default:
		pr.answer, pr.asked, pr.problem = a, asked, ""
	}
	// The same reason in other numbers (garbage values, a local port) is no
	// change: said again, it would be a line at every poll.
	problem, changed := pr.problem, normalise(pr.problem) != normalise(pr.logged)
	pr.logged = problem
	say, unsaid := pr.sayChange(p.now(), changed)
	pr.mu.Unlock()
	if problem == "" {
		p.up.WithLabelValues(pr.url).Set(1)
	} else {
		p.up.WithLabelValues(pr.url).Set(0)
	}
	switch {
	case unsaid == 0:
	case problem == "":
		p.log.Warn("peer flapping: changes not logged one by one", "peer", pr.url, "changes", unsaid,
			"within", summaryEvery, "now", "added")
	default:
		p.log.Warn("peer flapping: changes not logged one by one", "peer", pr.url, "changes", unsaid,
			"within", summaryEvery, "now", "left out", "why", problem)
	}
	switch {
	case !say || unsaid > 0: // the summary said the state
	case problem == "":
		p.log.Info("peer readings added to the fast signal", "peer", pr.url)
	default:
		p.log.Warn("peer left out of the fast signal", "peer", pr.url, "why", problem)
	}
}

// peerLogChanges is how many of a peer's changes are said within
// summaryEvery; more are counted, and summarised with the state the peer is
// in at its first ask after that time. A peer that flaps (it answers about
// as slowly as the timeout, one of two hosts behind its name is broken)
// would otherwise be logged at every poll.
const peerLogChanges = 4

// sayChange reports whether a change (changed) is said, and how many were
// left unsaid in the time that ended at now. Called under pr.mu.
func (pr *peer) sayChange(now time.Time, changed bool) (say bool, unsaid int) {
	if now.Sub(pr.window) >= summaryEvery {
		unsaid = pr.unsaid
		pr.window, pr.said, pr.unsaid = now, 0, 0
	}
	switch {
	case !changed:
	case pr.said < peerLogChanges:
		pr.said++
		say = true
	default:
		pr.unsaid++
	}
	return say, unsaid
}

// maxProblem bounds why a peer is left out: the text quotes what the peer
// sent (a server name, a status line, a JSON path), and goes to the log and,
// each cycle, to every server's reason in the plan.
const maxProblem = 512

// clipProblem cuts why to maxProblem bytes, on a character boundary.
func clipProblem(why string) string {
	if len(why) <= maxProblem {
		return why
	}
	cut := maxProblem
	for cut > 0 && !utf8.RuneStart(why[cut]) {
		cut--
	}
	return why[:cut] + "…"
}

// ask GETs the peer's PeerPath within timeout and checks the answer.
func (p *peerSet) ask(ctx context.Context, pr *peer, timeout time.Duration) (*peerAnswer, error) {
	if pr.client == nil {
		return nil, pr.broken
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(pr.url, "/")+PeerPath, nil)
	if err != nil {
		return nil, fmt.Errorf("request: %w", err)
	}
	resp, err := pr.client.Do(req)
	if err != nil {
		if timedOut(err) {
			return nil, fmt.Errorf("down: no answer within %s", timeout)
		}
		return nil, fmt.Errorf("down: %w", pr.client.Redact(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("down: HTTP %s%s", resp.Status, pr.refusedWhy(resp.StatusCode))
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, peerMaxBody+1))
	switch {
	case timedOut(err):
		return nil, fmt.Errorf("down: answer not read within %s", timeout)
	case err != nil:
		return nil, fmt.Errorf("down: reading the answer: %w", pr.client.Redact(err))
	case len(body) > peerMaxBody:
		return nil, fmt.Errorf("garbage: an answer over %d MiB", peerMaxBody>>20)
	}
	var a peerAnswer
	if err := json.NewDecoder(bytes.NewReader(body)).Decode(&a); err != nil {
		return nil, fmt.Errorf("garbage: %w", err)
	}
	if err := a.validate(); err != nil {
		return nil, fmt.Errorf("garbage: %w", err)
	}
	return &a, nil
}

// timedOut reports whether err is the ask's deadline or its connection's
// read deadline (both the ask's timeout): whichever comes first, the peer
// is said alike, not once in each wording.
func timedOut(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded)
}

// publish keeps the backend's newest own reading for the peers, each
// server with its address in addrs (by name).
func (p *peerSet) publish(backend string, r weighter.LocalRead, addrs map[string]string) {
	if r.Since.IsZero() || r.Dead != nil {
		return // no rate yet, or a dead signal: nothing a peer can add
	}
	servers := make(map[string]peerServerRead, len(r.Servers))
	for name, c := range r.Servers {
		if !c.Reset {
			servers[name] = peerServerRead{BytesPerSecond: c.Rate, Sessions: c.Sessions, Address: addrs[name]}
		}
	}
	p.mu.Lock()
	p.own[backend] = ownRead{at: r.At, span: r.At.Sub(r.Since), servers: servers, counts: r.Counts}
	p.mu.Unlock()
}

// forget drops the published readings of backends not in keep.
func (p *peerSet) forget(keep []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for name := range p.own {
		if !slices.Contains(keep, name) {
			delete(p.own, name)
			p.added.DeleteLabelValues(name)
		}
	}
}

// ServeHTTP serves this daemon's own readings (PeerPath).
func (p *peerSet) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	now := p.now()
	a := peerAnswer{Instance: p.instance, Backends: map[string]peerBackendRead{}}
	p.mu.Lock()
	for name, r := range p.own {
		a.Backends[name] = peerBackendRead{AgeSeconds: max(now.Sub(r.at), 0).Seconds(),
			SpanSeconds: r.span.Seconds(), Servers: r.servers, Connections: r.counts}
	}
	p.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(a)
}

// peerReading is one peer's fresh reading of a backend.
type peerReading struct {
	peer    string
	servers map[string]peerServerRead
}

// readings returns the fresh readings of backend from every peer, in the
// own signal's unit (connections: IPVS's counts), and a note for the plan's
// reason saying which were added and why others were left out.
func (p *peerSet) readings(backend string, connections bool) ([]peerReading, string) {
	p.mu.Lock()
	peers := slices.Sorted(maps.Keys(p.peers))
	// A copy: a reload's set changes p.peers while this cycle reads them.
	all, t := maps.Clone(p.peers), p.timing
	p.mu.Unlock()
	if len(peers) == 0 {
		// No peers (any more): no series, rather than the last count.
		p.added.DeleteLabelValues(backend)
		return nil, ""
	}
	now := p.now()
	var out []peerReading
	var left []string
	// Per instance, the first URL added: one daemon listed under two URLs
	// (a trailing /, its name and its address) is added once, not twice.
	addedAs := map[string]string{}
	for _, u := range peers {
		pr := all[u]
		pr.mu.Lock()
		a, asked, problem := pr.answer, pr.asked, pr.problem
		pr.mu.Unlock()
		if a == nil || problem != "" {
			left = append(left, fmt.Sprintf("%s: %s", u, problem))
			continue
		}
		b, ok := a.Backends[backend]
		if !ok {
			left = append(left, fmt.Sprintf("%s: no reading of backend %s", u, backend))
			continue
		}
		if b.Connections != connections {
			left = append(left, fmt.Sprintf("%s: backend %s counts %s there, %s here", u, backend,
				unitName(b.Connections), unitName(connections)))
			continue
		}
		// A backend whose reading stopped (its HAProxy dump fails, its fast
		// signal is dead there) is stale on its own; the peer's others go on.
		age := now.Sub(asked).Seconds() + b.AgeSeconds
		stale := t.stale(age, b.SpanSeconds)
		p.logStale(pr, backend, stale, age)
		if stale {
			left = append(left, fmt.Sprintf("%s: stale (%.3gs old)", u, age))
			continue
		}
		if first, ok := addedAs[a.Instance]; ok {
			left = append(left, fmt.Sprintf("%s: the same daemon as %s", u, first))
			continue
		}
		out = append(out, peerReading{peer: u, servers: b.Servers})
		addedAs[a.Instance] = u
	}
	p.added.WithLabelValues(backend).Set(float64(len(out)))
	note := fmt.Sprintf("peers %d of %d added", len(out), len(peers))
	if len(left) > 0 {
		note += " (left out: " + strings.Join(left, "; ") + ")"
	}
	return out, note
}

// noneAdded says that the backend's cycle added no peer's reading: its own
// read failed, and it weighs by its source alone.
func (p *peerSet) noneAdded(backend string) {
	p.mu.Lock()
	none := len(p.peers) == 0
	p.mu.Unlock()
	if none {
		p.added.DeleteLabelValues(backend)
		return
	}
	p.added.WithLabelValues(backend).Set(0)
}

// unitName says what a fast signal counts.
func unitName(connections bool) string {
	if connections {
		return "connections (IPVS)"
	}
	return "bytes (HAProxy)"
}

// logStale says once when a peer's reading of backend goes stale, and once
// when it is fresh again.
func (p *peerSet) logStale(pr *peer, backend string, stale bool, age float64) {
	pr.mu.Lock()
	changed := pr.stale[backend] != stale
	pr.stale[backend] = stale
	pr.mu.Unlock()
	switch {
	case !changed:
	case stale:
		p.log.Warn("peer's reading left out of the fast signal: stale", "peer", pr.url, "backend", backend,
			"age_seconds", age)
	default:
		p.log.Info("peer's reading fresh again", "peer", pr.url, "backend", backend)
	}
}

// peeredReader is a backend's fast reader with its peers' readings added:
// per server, their rates and sessions to its own, and their rates over its
// own read span to its byte counter (which then never goes back, whichever
// peers come and go).
type peeredReader struct {
	own     weighter.LocalReader
	backend string
	peers   *peerSet

	mu     sync.Mutex
	lastAt time.Time
	added  map[string]float64 // per server: the peers' bytes added so far
}

var _ weighter.LocalReader = (*peeredReader)(nil)

func newPeeredReader(own weighter.LocalReader, backend string, peers *peerSet) *peeredReader {
	return &peeredReader{own: own, backend: backend, peers: peers, added: map[string]float64{}}
}

// ReadLocal reads the own signal, publishes it, and adds the peers'.
func (r *peeredReader) ReadLocal(ctx context.Context, servers []string) (weighter.LocalRead, error) {
	cur, err := r.own.ReadLocal(ctx, servers)
	if err != nil {
		r.peers.noneAdded(r.backend)
		return cur, err
	}
	var addrs map[string]string
	if a, ok := r.own.(serverAddresses); ok {
		addrs = a.addresses()
	}
	r.peers.publish(r.backend, cur, addrs)
	got, note := r.peers.readings(r.backend, cur.Counts)
	matches := make([]peerMatch, len(got))
	for i, g := range got {
		matches[i] = matchPeer(g.servers, addrs)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	span := 0.0
	if !cur.Since.IsZero() && cur.At.After(r.lastAt) {
		span = cur.At.Sub(cur.Since).Seconds()
		r.lastAt = cur.At
	}
	out := cur
	out.Peers = note
	out.Servers = make(map[string]weighter.LocalCounter, len(cur.Servers))
	for name, c := range cur.Servers {
		rate, sess := 0.0, 0.0
		for _, m := range matches {
			s := m.of(name, addrs[name])
			rate, sess = rate+s.BytesPerSecond, sess+s.Sessions
		}
		r.added[name] += rate * span
		c.Bytes += r.added[name]
		if !c.Reset {
			c.Rate += rate
			c.Sessions += sess
		}
		out.Servers[name] = c
	}
	return out, nil
}

// serverAddresses is a fast reader that knows its servers' addresses.
type serverAddresses interface {
	// addresses are the servers' ip:port, by name.
	addresses() map[string]string
}

// addresses are the servers' addresses as the newest read of HAProxy found.
func (r *localReader) addresses() map[string]string {
	out := map[string]string{}
	for _, s := range r.b.KnownServers() {
		if s.Address != "" {
			out[s.Name] = s.Address
		}
	}
	return out
}

// peerMatch finds a peer's reading of each own server: by address when the
// two balancers share any (a name does not name the same server on every
// balancer: server-template fills its slots in the order DNS answers),
// by name when they share none (balancers reaching the servers at other
// addresses, or a peer that does not say them).
type peerMatch struct {
	byName map[string]peerServerRead
	byAddr map[string]peerServerRead // nil: match by name
	// names counts the own servers at each address: the peer's reading of
	// the address is shared among them, so that it is added once in all.
	names map[string]int
}

func matchPeer(servers map[string]peerServerRead, own map[string]string) peerMatch {
	m := peerMatch{byName: servers, names: map[string]int{}}
	for _, a := range own {
		m.names[a]++
	}
	shared := false
	byAddr := map[string]peerServerRead{}
	for _, s := range servers {
		if s.Address == "" {
			continue
		}
		shared = shared || m.names[s.Address] > 0
		// One server under two names there: its readings summed.
		sum := byAddr[s.Address]
		byAddr[s.Address] = peerServerRead{BytesPerSecond: sum.BytesPerSecond + s.BytesPerSecond,
			Sessions: sum.Sessions + s.Sessions, Address: s.Address}
	}
	if shared {
		m.byAddr = byAddr
	}
	return m
}

// of is the peer's reading of the own server name at addr.
func (m peerMatch) of(name, addr string) peerServerRead {
	if m.byAddr != nil && addr != "" {
		s := m.byAddr[addr]
		if n := float64(m.names[addr]); n > 1 {
			s.BytesPerSecond, s.Sessions = s.BytesPerSecond/n, s.Sessions/n
		}
		return s
	}
	return m.byName[name]
}

// startPeers points the peer set at cfg's peers (a reload may change them)
// and says when this daemon's own readings cannot reach them.
func (d *Daemon) startPeers(ctx context.Context, cfg *config.Config) {
	names := make([]string, len(cfg.Backends))
	for i, b := range cfg.Backends {
		names[i] = b.Name
	}
	d.peers.forget(names)
	d.peers.useClient(cfg.PeerClient.HTTP)
	switch changed := d.peers.set(ctx, cfg.Peers, time.Duration(cfg.Interval)); {
	case !changed:
		return // nothing new to say
	case len(cfg.Peers) == 0:
		d.log.Info("no peers any more: each backend's fast signal is this balancer's own")
		return
	}
	if host, _, err := net.SplitHostPort(d.config().Listen); err == nil {
		if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
			d.log.Warn("peers are set but listen is a loopback address: the peers on other hosts cannot read this daemon's readings",
				"listen", d.config().Listen)
		}
	}
	t := timingFor(time.Duration(cfg.Interval))
	d.log.Info("adding the peers' fast readings", "peers", cfg.Peers, "poll", t.Poll, "timeout", t.Timeout)
}
