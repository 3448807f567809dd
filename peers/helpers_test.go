package peers

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/haproxy-weighter/haproxy-weighter/metrics"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// newSet is a Set whose gauges are registered on reg.
func newSet(reg prometheus.Registerer, log *slog.Logger) *Set {
	return New(metrics.NewPeers(reg), log)
}

// The fake fast readers below stand for a backend's own reading, which a
// Reader adds its peers' to.

// constReader is a LocalReader whose servers s1 and s2 carry 100 B/s over one
// session each, read at the current time.
type constReader struct{ last time.Time }

func (c *constReader) ReadLocal(context.Context, []weighter.ServerState) (weighter.LocalRead, error) {
	now := time.Now()
	r := weighter.LocalRead{At: now, Since: c.last, Servers: map[string]weighter.LocalCounter{}}
	for _, s := range []string{"s1", "s2"} {
		r.Servers[s] = weighter.LocalCounter{Rate: 100, Sessions: 1, Reset: c.last.IsZero()}
	}
	c.last = now
	return r, nil
}

// growingReader is a LocalReader whose server s1 moves 1,000 bytes between
// two reads, a second apart.
type growingReader struct {
	n    int
	last time.Time
}

func (g *growingReader) ReadLocal(context.Context, []weighter.ServerState) (weighter.LocalRead, error) {
	g.n++
	at := time.Unix(1_000_000+int64(g.n), 0)
	r := weighter.LocalRead{At: at, Since: g.last, Servers: map[string]weighter.LocalCounter{
		"s1": {Bytes: float64(1000 * g.n), Rate: 1000, Sessions: 1, Reset: g.last.IsZero()}}}
	g.last = at
	return r, nil
}

// countingReader is growingReader's IPVS twin: its signal counts
// connections (Rate is s1's mean open connections).
type countingReader struct{ growingReader }

func (c *countingReader) ReadLocal(ctx context.Context, servers []weighter.ServerState) (weighter.LocalRead, error) {
	r, err := c.growingReader.ReadLocal(ctx, servers)
	r.Counts = true
	return r, err
}

// failingAfter is a LocalReader that reads like constReader until fail is
// set, then fails as an HAProxy that stopped answering does.
type failingAfter struct {
	constReader
	fail atomic.Bool
}

func (f *failingAfter) ReadLocal(ctx context.Context, servers []weighter.ServerState) (weighter.LocalRead, error) {
	if f.fail.Load() {
		return weighter.LocalRead{}, errors.New("admin socket: connection refused")
	}
	return f.constReader.ReadLocal(ctx, servers)
}
