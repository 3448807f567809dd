package sources

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// Counters a HAProxyStats source can turn into load.
const (
	CounterBytesIn         = "bytes_in"         // bytes from clients to the server (bin), as a rate
	CounterBytesOut        = "bytes_out"        // bytes from the server to clients (bout), as a rate
	CounterSessionsTotal   = "sessions_total"   // sessions started (stot), as a rate
	CounterCurrentSessions = "current_sessions" // sessions open now (scur), a gauge
)

// DefaultSampleInterval separates the two reads of the first Fetch.
const DefaultSampleInterval = time.Second

// ServerStat is one server's counters from HAProxy's `show stat`.
type ServerStat struct {
	Server          string
	BytesIn         uint64
	BytesOut        uint64
	SessionsTotal   uint64
	CurrentSessions uint64
}

// StatsReader reads the per-server statistics of one HAProxy backend.
// haproxy.Client implements it.
type StatsReader interface {
	Stats(ctx context.Context, backend string) ([]ServerStat, error)
}

// HAProxyStatsConfig configures the `source: haproxy` load source.
type HAProxyStatsConfig struct {
	// Counter is bytes_in, bytes_out, sessions_total (rates) or current_sessions.
	Counter string `yaml:"counter"`
	// SampleInterval separates the two reads the first Fetch needs to compute a
	// rate; 0 means DefaultSampleInterval.
	SampleInterval time.Duration `yaml:"sample_interval"`
	// PerConnection divides each server's rate by its mean open sessions (scur)
	// over the same interval: the mean of scur at the two reads the rate is
	// computed from. A server with no session at either read has load 0, the
	// lightest. It needs a rate counter (not current_sessions).
	//
	// Why: under leastconn, HAProxy keeps each server's open connections in
	// proportion to its weight, so a server's load is its weight times its load
	// per connection. Equal loads therefore need weights ∝ connections/load, and
	// the stateless functions, which give weights ∝ 1/load, reach that only when
	// fed load per connection. Fed plain load they stop at a fixed ratio. In the
	// simulator sweep (sim/README-sweep.md), with reads every 2 s, the default
	// policy closed 89-94 % of the leastconn → oracle gap fed load per
	// connection, against 53-67 % fed plain load. Both values come from the same
	// pair of reads because in the sweep, dividing 10 s-old rates by live
	// connection counts did worse than plain leastconn.
	PerConnection bool `yaml:"per_connection"`
}

// Validate reports an unknown counter, per_connection without a rate counter,
// or a negative interval.
func (c HAProxyStatsConfig) Validate() error {
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
	return nil
}

// HAProxyStats is the load source that needs no monitoring stack: it reads the
// backend's own counters from HAProxy and turns them into a per-server rate,
// optionally per open session (see HAProxyStatsConfig.PerConnection), or takes
// the current-sessions gauge as is. Byte counters of open connections move
// only with HAProxy's `option contstats`, and then about every 5 s per
// connection (measured on HAProxy 2.6). It sees only the traffic of this
// HAProxy: with several balancers in front of the same servers, each one weighs
// by its own share, not by the servers' real load.
type HAProxyStats struct {
	cfg     HAProxyStatsConfig
	backend string
	stats   StatsReader
	log     *slog.Logger
	now     func() time.Time

	mu   sync.Mutex
	prev map[string]ServerStat
	at   time.Time
}

var _ weighter.Source = (*HAProxyStats)(nil)

// NewHAProxyStats returns the source for one backend, reading through stats.
func NewHAProxyStats(cfg HAProxyStatsConfig, backend string, stats StatsReader, log *slog.Logger) (*HAProxyStats, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if stats == nil {
		return nil, fmt.Errorf("haproxy source: no stats reader")
	}
	if cfg.SampleInterval == 0 {
		cfg.SampleInterval = DefaultSampleInterval
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &HAProxyStats{cfg: cfg, backend: backend, stats: stats, log: log, now: time.Now}, nil
}

// Fetch returns one point per server. A rate needs two reads: the first Fetch
// takes them sample_interval apart, later ones use the previous Fetch's read.
// A server whose counter went down (HAProxy restarted) or that was not in the
// previous read has no point this cycle.
func (h *HAProxyStats) Fetch(ctx context.Context) (weighter.Loads, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	cur, at, err := h.read(ctx)
	if err != nil {
		return nil, err
	}
	if h.cfg.Counter == CounterCurrentSessions {
		return h.gauge(cur, at), nil
	}
	if h.prev == nil {
		if err := h.wait(ctx); err != nil {
			return nil, err
		}
		h.prev, h.at = cur, at
		if cur, at, err = h.read(ctx); err != nil {
			return nil, err
		}
	}
	loads := h.rates(cur, at)
	h.prev, h.at = cur, at
	return loads, nil
}

func (h *HAProxyStats) read(ctx context.Context) (map[string]ServerStat, time.Time, error) {
	list, err := h.stats.Stats(ctx, h.backend)
	at := h.now()
	if err != nil {
		return nil, at, &Error{Kind: ErrUnreachable, Source: "haproxy", Query: h.backend, Err: err}
	}
	if len(list) == 0 {
		return nil, at, &Error{Kind: ErrNoData, Source: "haproxy", Query: h.backend}
	}
	m := make(map[string]ServerStat, len(list))
	for _, s := range list {
		m[s.Server] = s
	}
	return m, at, nil
}

func (h *HAProxyStats) wait(ctx context.Context) error {
	t := time.NewTimer(h.cfg.SampleInterval)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return &Error{Kind: ErrUnreachable, Source: "haproxy", Query: h.backend, Err: ctx.Err()}
	}
}

func (h *HAProxyStats) gauge(cur map[string]ServerStat, at time.Time) weighter.Loads {
	loads := make(weighter.Loads, len(cur))
	for name, s := range cur {
		loads[name] = weighter.Series{{Time: at, Value: float64(s.CurrentSessions)}}
	}
	return loads
}

func (h *HAProxyStats) rates(cur map[string]ServerStat, at time.Time) weighter.Loads {
	dt := at.Sub(h.at).Seconds()
	loads := make(weighter.Loads, len(cur))
	var reset []string
	for name, s := range cur {
		p, ok := h.prev[name]
		if !ok || dt <= 0 {
			continue
		}
		c, pc := h.counter(s), h.counter(p)
		if c < pc {
			reset = append(reset, name)
			continue
		}
		rate := float64(c-pc) / dt
		if h.cfg.PerConnection {
			rate = perConnection(rate, p.CurrentSessions, s.CurrentSessions)
		}
		loads[name] = weighter.Series{{Time: at, Value: rate}}
	}
	if len(reset) > 0 {
		slices.Sort(reset)
		h.log.Warn("counter went down (haproxy restarted?): no point this cycle",
			"backend", h.backend, "counter", h.cfg.Counter, "servers", reset)
	}
	return loads
}

// perConnection divides rate by the mean of the sessions open at the two reads
// it was computed from. With no session at either read the server is empty, the
// lightest there is: 0, whatever short connections came and went in between.
func perConnection(rate float64, prev, cur uint64) float64 {
	conns := (float64(prev) + float64(cur)) / 2
	if conns == 0 {
		return 0
	}
	return rate / conns
}

func (h *HAProxyStats) counter(s ServerStat) uint64 {
	switch h.cfg.Counter {
	case CounterBytesIn:
		return s.BytesIn
	case CounterBytesOut:
		return s.BytesOut
	}
	return s.SessionsTotal
}
