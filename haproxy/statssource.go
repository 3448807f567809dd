package haproxy

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/internal/duration"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// Counters a HAProxyStats source can turn into load.
const (
	CounterBytesIn         = "bytes_in"         // bytes from clients to the server (bin), as a rate
	CounterBytesOut        = "bytes_out"        // bytes from the server to clients (bout), as a rate
	CounterSessionsTotal   = "sessions_total"   // sessions started (stot), as a rate
	CounterCurrentSessions = "current_sessions" // sessions open now (scur), a gauge
)

// DefaultRateWindow is the span a rate covers when rate_window is unset: two of
// the ~5 s steps in which `option contstats` advances an open connection's byte
// counters (HAProxy 2.6, measured), so that a rate is not one step or none.
const DefaultRateWindow = 10 * time.Second

// ServerStat is one server's counters from HAProxy's `show stat`.
type ServerStat struct {
	Server          string
	BytesIn         uint64
	BytesOut        uint64
	SessionsTotal   uint64
	CurrentSessions uint64
}

// StatsReader reads the per-server counters of one backend and when they were
// read. A *Backend is one: it hands over the `show stat` its Servers call read
// in the same cycle, so a cycle reads HAProxy's statistics once.
type StatsReader interface {
	ReadStats(ctx context.Context) ([]ServerStat, time.Time, error)
}

// ErrNoServers: the backend lists no servers, so there is no load to read.
var ErrNoServers = errors.New("the backend lists no servers")

// StatsConfig configures the `source: haproxy` load source.
type StatsConfig struct {
	// Counter is bytes_in, bytes_out, sessions_total (rates) or current_sessions.
	Counter string `yaml:"counter"`
	// RateWindow is the span a rate covers; 0 means DefaultRateWindow. The
	// source keeps its reads (one per Fetch) of the last rate_window and takes
	// each server's rate between the newest read and the newest read at least
	// rate_window older (a tenth less is accepted, for the cycle's jitter).
	//
	// Why not the rate between consecutive reads: with `option contstats`
	// HAProxy advances each open connection's byte counters only about every
	// 5 s, so a rate over one 5 s interval sees one step of some connections
	// and none of others. In the demo that made the busiest server look idle
	// for a cycle; it got weight 256 and was flooded. A 10 s window read every
	// 2 s has lag but no such holes: in the simulator sweep it closes 79/71/88 %
	// of the leastconn → oracle gap (docs/research/simulator-sweep.md, section 3).
	RateWindow duration.Duration `yaml:"rate_window"`
	// SampleInterval is the shortest span a rate may cover before the reads
	// span rate_window. 0 (the default) means rate_window itself: a new source,
	// and a server that appeared or whose counter went down, has no point until
	// its reads span rate_window, so the first cycles hold the weights (result
	// skipped_coverage) for about rate_window. That is what the operator of a
	// running daemon wants: no weight is ever written from a short, aliased rate,
	// and no cycle blocks for a whole window. When set, the first Fetch waits
	// sample_interval and reads again, and rates cover all the reads so far until
	// they span rate_window: useful for `once`, whose single cycle would otherwise
	// hold. It must fit in the cycle timeout (timeout, or interval when unset).
	SampleInterval duration.Duration `yaml:"sample_interval"`
	// PerConnection divides each server's rate by its mean open sessions (scur)
	// over the same reads: the time-weighted mean of scur at the reads the rate
	// is computed from (two reads: the mean of the two). A server with no
	// session at any of them has load 0, the lightest. It needs a rate counter
	// (not current_sessions).
	//
	// Why: under leastconn, HAProxy keeps each server's open connections in
	// proportion to its weight, so a server's load is its weight times its load
	// per connection. Equal loads therefore need weights ∝ connections/load, and
	// the stateless functions, which give weights ∝ 1/load, reach that only when
	// fed load per connection. Fed plain load they stop at a fixed ratio. In the
	// simulator sweep (docs/research/simulator-sweep.md), the default policy closed 89-94 % of
	// the leastconn → oracle gap fed load per connection, against 53-67 % fed
	// plain load. Load and sessions cover the same window because in the sweep,
	// dividing 10 s-old rates by live connection counts did worse than plain
	// leastconn.
	PerConnection bool `yaml:"per_connection"`
}

// Validate reports an unknown counter, per_connection without a rate counter,
// or a negative duration.
func (c StatsConfig) Validate() error {
	switch c.Counter {
	case CounterBytesIn, CounterBytesOut, CounterSessionsTotal, CounterCurrentSessions:
	default:
		return fmt.Errorf("haproxy source: unknown counter %q (want %s, %s, %s or %s)", c.Counter,
			CounterBytesIn, CounterBytesOut, CounterSessionsTotal, CounterCurrentSessions)
	}
	if c.PerConnection && c.Counter == CounterCurrentSessions {
		return fmt.Errorf("haproxy source: per_connection needs a rate counter (%s, %s or %s), not %s, which would divide sessions by themselves",
			CounterBytesIn, CounterBytesOut, CounterSessionsTotal, CounterCurrentSessions)
	}
	if c.SampleInterval < 0 {
		return fmt.Errorf("haproxy source: sample_interval %s is negative", c.SampleInterval)
	}
	if c.RateWindow < 0 {
		return fmt.Errorf("haproxy source: rate_window %s is negative", c.RateWindow)
	}
	return nil
}

// ForOneCycle returns the configuration a single cycle (`once`) needs, and how
// long its first Fetch will wait. A running daemon holds its first cycles
// until its reads span rate_window; one cycle instead waits that long and
// reads again, unless sample_interval is set (then it is used as it is).
func (c StatsConfig) ForOneCycle() (StatsConfig, time.Duration) {
	if c.SampleInterval > 0 {
		return c, 0
	}
	c.SampleInterval = cmp.Or(c.RateWindow, duration.Duration(DefaultRateWindow))
	return c, time.Duration(c.SampleInterval)
}

// StatsSource is the load source that needs no monitoring stack: it reads the
// backend's own counters from HAProxy and turns them into a per-server rate over
// rate_window, optionally per open session (see StatsConfig), or takes
// the current-sessions gauge as is. Byte counters of open connections move
// only with HAProxy's `option contstats`, and then about every 5 s per
// connection (measured on HAProxy 2.6). It sees only the traffic of this
// HAProxy: with several balancers in front of the same servers, each one weighs
// by its own share, not by the servers' real load.
type StatsSource struct {
	cfg     StatsConfig
	backend string
	stats   StatsReader
	log     *slog.Logger

	mu      sync.Mutex
	history history
}

var _ weighter.Source = (*StatsSource)(nil)

// NewStatsSource returns the source for one backend, reading through stats
// (the backend's *Backend, which the cycle's target also uses).
func NewStatsSource(cfg StatsConfig, backend string, stats StatsReader, log *slog.Logger) (*StatsSource, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if stats == nil {
		return nil, fmt.Errorf("haproxy source: no stats reader")
	}
	if cfg.RateWindow == 0 {
		cfg.RateWindow = duration.Duration(DefaultRateWindow)
	}
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	h := &StatsSource{cfg: cfg, backend: backend, stats: stats, log: log}
	h.history = history{window: time.Duration(cfg.RateWindow), minSpan: time.Duration(cfg.RateWindow), servers: map[string][]read{}}
	if cfg.SampleInterval > 0 && cfg.SampleInterval < cfg.RateWindow {
		h.history.minSpan = time.Duration(cfg.SampleInterval)
	}
	return h, nil
}

// ReadThrough makes the source read through r from now on, keeping its
// history. A reload that keeps the source builds a new target; reading through
// the old one would miss the hand-over and cost a second `show stat` a cycle.
func (h *StatsSource) ReadThrough(r StatsReader) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stats = r
}

// Fetch reads HAProxy once and returns one point per server whose reads span
// the rate window (see StatsConfig.RateWindow and SampleInterval): the
// rate from its read rate_window ago to this one. A server whose counter went
// down (HAProxy restarted), or that is new, has no point until its reads after
// that span the window again.
func (h *StatsSource) Fetch(ctx context.Context, _ []weighter.ServerState) (weighter.Loads, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	cur, at, err := h.read(ctx)
	if err != nil {
		return nil, err
	}
	if h.cfg.Counter == CounterCurrentSessions {
		return h.gauge(cur, at), nil
	}
	first := h.history.empty()
	h.record(cur, at)
	if first && h.cfg.SampleInterval > 0 {
		if err := h.wait(ctx); err != nil {
			return nil, err
		}
		if cur, at, err = h.read(ctx); err != nil {
			return nil, err
		}
		h.record(cur, at)
	}
	return h.history.rates(at, h.cfg.PerConnection), nil
}

// record adds one read to the history and logs the servers whose counter went down.
func (h *StatsSource) record(cur map[string]ServerStat, at time.Time) {
	reads := make(map[string]read, len(cur))
	for name, s := range cur {
		reads[name] = read{at: at, counter: h.counter(s), sessions: s.CurrentSessions}
	}
	if reset := h.history.add(reads, at); len(reset) > 0 {
		h.log.Warn("counter went down",
			"backend", h.backend, "counter", h.cfg.Counter, "servers", reset, "rate_window", h.cfg.RateWindow,
			"reason", "HAProxy restarted or its counters were cleared", "effect", "no point until the reads after it span rate_window")
	}
}

func (h *StatsSource) read(ctx context.Context) (map[string]ServerStat, time.Time, error) {
	list, at, err := h.stats.ReadStats(ctx)
	if err != nil {
		return nil, at, fmt.Errorf("haproxy: source unreachable (show stat %s): %w", h.backend, err)
	}
	if len(list) == 0 {
		return nil, at, fmt.Errorf("haproxy: no data (show stat %s): %w", h.backend, ErrNoServers)
	}
	m := make(map[string]ServerStat, len(list))
	for _, s := range list {
		m[s.Server] = s
	}
	return m, at, nil
}

func (h *StatsSource) wait(ctx context.Context) error {
	t := time.NewTimer(time.Duration(h.cfg.SampleInterval))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("haproxy: source unreachable (show stat %s): %w", h.backend, ctx.Err())
	}
}

func (h *StatsSource) gauge(cur map[string]ServerStat, at time.Time) weighter.Loads {
	loads := make(weighter.Loads, len(cur))
	for name, s := range cur {
		loads[name] = weighter.Series{{Time: at, Value: float64(s.CurrentSessions)}}
	}
	return loads
}

func (h *StatsSource) counter(s ServerStat) uint64 {
	switch h.cfg.Counter {
	case CounterBytesIn:
		return s.BytesIn
	case CounterBytesOut:
		return s.BytesOut
	}
	return s.SessionsTotal
}
