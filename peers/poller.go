package peers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"reflect"
	"slices"
	"sync"
	"time"

	promconfig "github.com/prometheus/common/config"

	"github.com/haproxy-weighter/haproxy-weighter/metrics"
	"github.com/haproxy-weighter/haproxy-weighter/sources"
)

// Timing is how often peers are asked and when a reading is too old.
type Timing struct {
	// Poll is the time between two asks of one peer: a quarter of the
	// interval, so that a reading reaches the other daemons well within a
	// cycle of it being made.
	Poll time.Duration
	// Timeout bounds one ask (half the interval): a slow peer is left out,
	// never waited for by a cycle, which only takes what was fetched.
	Timeout time.Duration
	// Interval is the daemon's: a reading older than 3 intervals (or twice
	// its own span, up to maxSpan, when dumps are spaced wider) is stale.
	Interval time.Duration
}

// TimingFor is the timing of a daemon that runs a cycle every interval.
func TimingFor(interval time.Duration) Timing {
	return Timing{Poll: interval / 4, Timeout: interval / 2, Interval: interval}
}

// stale reports whether a reading age seconds old over span seconds is left
// out. In float seconds: a peer's numbers are not trusted to fit a Duration.
func (t Timing) stale(age, span float64) bool {
	return age > max(3*t.Interval.Seconds(), 2*min(span, maxSpan.Seconds()))
}

// maxSpan bounds the span that makes a peer's reading fresh for longer:
// dumps of 100,000 streams are a minute apart (haproxy.DefaultLocalBudget).
// A longer span is an outage (the first dump after an hour without one
// spans the hour), whose reading must not stay fresh for two hours when
// the peer's reads stop again; or a lie.
const maxSpan = time.Minute

// Set is a daemon's side of peering: the readings it publishes and its
// peers' it fetches. It outlives reloads; Poll changes the peers.
type Set struct {
	instance string
	log      *slog.Logger
	now      func() time.Time
	metrics  *metrics.Peers

	mu     sync.Mutex
	own    map[string]ownRead // per backend
	peers  map[string]*peer   // per URL
	timing Timing
	// client is how the peers are asked (peer_client, UseClient); started
	// is what the running pollers were started with.
	client, started promconfig.HTTPClientConfig
}

// New returns a Set with no peers, which says what it does in log and m.
func New(m *metrics.Peers, log *slog.Logger) *Set {
	id := make([]byte, 8)
	_, _ = rand.Read(id) // never fails (crypto/rand)
	return &Set{instance: hex.EncodeToString(id), log: log, now: time.Now, metrics: m,
		client: promconfig.DefaultHTTPClientConfig, started: promconfig.DefaultHTTPClientConfig,
		own: map[string]ownRead{}, peers: map[string]*peer{}}
}

// peer is one other daemon, fetched in the background.
type peer struct {
	url string
	// client asks it (client.go); nil when it could not be built, and then
	// broken says why.
	client *sources.HTTPClient
	// credentials: the client sends some, which a 401 then refused.
	credentials bool
	// broken is why client could not be built.
	broken error
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	answer  *answer
	asked   time.Time // when the answer was asked for
	problem string    // why the peer is left out ("" = it is not)
	logged  string    // the problem the log last said ("" = fine)
	// The changes said since window began, and those left unsaid: a peer
	// that flaps is said logChanges times, then summarised (log.go).
	window       time.Time
	said, unsaid int
	// stale is, per backend, whether the log last said its reading was stale.
	stale map[string]bool
}

// Poll starts polling the peers in urls and stops those no longer in it,
// asking each every quarter of interval. ctx bounds every poller. It
// reports whether anything changed.
func (p *Set) Poll(ctx context.Context, urls []string, interval time.Duration) (changed bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	t := TimingFor(interval)
	restart := t != p.timing || !reflect.DeepEqual(p.client, p.started)
	for u, pr := range p.peers {
		if !slices.Contains(urls, u) || restart {
			pr.stop()
			delete(p.peers, u)
			p.metrics.ForgetPeer(u)
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
		pr.client, pr.credentials, pr.broken = newClient(u, p.client, t.Timeout)
		p.peers[u] = pr
		p.metrics.SetUp(u, false)
		go p.poll(pctx, pr, t)
	}
	return changed
}

// Stop ends every poller.
func (p *Set) Stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for u, pr := range p.peers {
		pr.stop()
		delete(p.peers, u)
	}
}

func (p *Set) poll(ctx context.Context, pr *peer, t Timing) {
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
func (p *Set) fetch(ctx context.Context, pr *peer, t Timing) {
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
	problem, changed := pr.problem, !sameReason(pr.problem, pr.logged)
	pr.logged = problem
	say, unsaid := pr.sayChange(p.now(), changed)
	pr.mu.Unlock()
	p.metrics.SetUp(pr.url, problem == "")
	p.logChange(pr.url, problem, say, unsaid)
}
