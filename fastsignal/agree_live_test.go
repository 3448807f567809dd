package fastsignal

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/haproxy"
	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// The fast signal's two readers measured against the truth (the kernel reader's acceptance):
// the kernel's socket table and `show sess all`, built as NewHAProxyChain
// builds them, read every 2 s side by side on one real HAProxy 2.6 (`mode
// tcp`, `balance leastconn`, health checks on) while clients of known,
// different constant rates hold long-lived connections and others open and
// close every few seconds. The servers are sinks of this process that log
// every byte they receive, with when, and every connection, with when it
// was accepted and closed: per interval and server, the bytes that arrived
// and the mean number of traffic connections open (health checks, which
// carry no byte, are not traffic) are known exactly over each reader's own
// span, and so is the load per connection the weighter derives from them
// (weighter.CombineFast: rate / max(sessions, 1)).

// agreeSink is one server: it counts what it receives.
type agreeSink struct {
	name string
	addr netip.AddrPort

	mu    sync.Mutex
	log   []agreeSample                 // every read: when, cumulative bytes after it
	conns map[netip.AddrPort]*agreeConn // by the peer: HAProxy's side
	total uint64
}

type agreeSample struct {
	at  time.Time
	cum uint64
}

// agreeConn is one connection a sink accepted.
type agreeConn struct {
	opened, closed time.Time // closed zero while open
	bytes          uint64
	log            []agreeSample // every read of it: when, its bytes after it
}

// bytesAt is what the connection had received by t.
func (c *agreeConn) bytesAt(t time.Time) uint64 {
	i := sort.Search(len(c.log), func(i int) bool { return c.log[i].at.After(t) })
	if i == 0 {
		return 0
	}
	return c.log[i-1].cum
}

func startAgreeSink(t *testing.T, name string) *agreeSink {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &agreeSink{name: name, addr: netip.MustParseAddrPort(ln.Addr().String()), conns: map[netip.AddrPort]*agreeConn{}}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	wg.Go(func() {
		var open []net.Conn
		defer func() {
			for _, c := range open {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			open = append(open, c)
			peer := netip.MustParseAddrPort(c.RemoteAddr().String())
			rec := &agreeConn{opened: time.Now()}
			s.mu.Lock()
			s.conns[peer] = rec
			s.mu.Unlock()
			wg.Go(func() { s.serve(c, rec) })
		}
	})
	return s
}

// serve reads one connection to its end, logging each read.
func (s *agreeSink) serve(c net.Conn, rec *agreeConn) {
	defer c.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := c.Read(buf)
		now := time.Now()
		s.mu.Lock()
		if n > 0 {
			rec.bytes += uint64(n)
			rec.log = append(rec.log, agreeSample{at: now, cum: rec.bytes})
			s.total += uint64(n)
			s.log = append(s.log, agreeSample{at: now, cum: s.total})
		}
		if err != nil {
			rec.closed = now
		}
		s.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// bytesAt is the cumulative bytes received by t.
func (s *agreeSink) bytesAt(t time.Time) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := sort.Search(len(s.log), func(i int) bool { return s.log[i].at.After(t) })
	if i == 0 {
		return 0
	}
	return s.log[i-1].cum
}

// readable is what a reader of open connections at the instants reads can
// count over (a, b]: every byte but those a connection received after the
// last read that saw it open (its last bytes, when it closed between two
// reads; all of them when it opened and closed between two), which neither
// the socket table (TIME_WAIT has no counters) nor show sess all (the
// stream is gone) holds any more.
func (s *agreeSink) readable(a, b time.Time, reads []time.Time) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n uint64
	for _, c := range s.conns {
		cut := b
		if !c.closed.IsZero() {
			i := sort.Search(len(reads), func(i int) bool { return !reads[i].Before(c.closed) })
			if i == 0 {
				continue
			}
			cut = reads[i-1]
		}
		n += c.bytesAt(earliest(b, cut)) - c.bytesAt(earliest(a, cut))
	}
	return n
}

func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// sessions is the mean number of traffic connections (ones that carried a
// byte) open over (a, b].
func (s *agreeSink) sessions(a, b time.Time) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var sec float64
	for _, c := range s.conns {
		if c.bytes == 0 {
			continue
		}
		end := c.closed
		if end.IsZero() || end.After(b) {
			end = b
		}
		start := c.opened
		if start.Before(a) {
			start = a
		}
		if end.After(start) {
			sec += end.Sub(start).Seconds()
		}
	}
	return sec / b.Sub(a).Seconds()
}

// peers classifies HAProxy's side of connections open at t: traffic,
// checks (accepted, no byte) and ones the sink had seen close by then.
func (s *agreeSink) peer(p netip.AddrPort, t time.Time) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.conns[p]
	switch {
	case !ok:
		return "unknown"
	case !c.closed.IsZero() && c.closed.Before(t):
		if c.bytes == 0 {
			return "closed check"
		}
		return "closed"
	case c.bytes == 0:
		return "check"
	}
	return "traffic"
}

// agreeClient writes rate bytes/s to HAProxy in 20 writes a second, for
// life (0: until the test ends), then closes.
func agreeClient(ctx context.Context, front string, rate int, life time.Duration) error {
	c, err := net.Dial("tcp", front)
	if err != nil {
		return fmt.Errorf("dial %s: %w", front, err)
	}
	defer c.Close()
	chunk := make([]byte, rate/20)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var end <-chan time.Time
	if life > 0 {
		end = time.After(life)
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-end:
			return nil
		case <-tick.C:
			if _, err := c.Write(chunk); err != nil {
				return fmt.Errorf("write: %w", err)
			}
		}
	}
}

// agreeRead is one reader's figures for one server over one interval.
type agreeRead struct {
	since, at time.Time
	rate      float64 // bytes/s, the reader's
	sessions  float64
	open      int // kernel: open at the read
}

// agreeInterval is one cycle of both readers.
type agreeInterval struct {
	kernel, sessions map[string]agreeRead
	// extra: kernel connections at the read that are not open traffic
	// connections of the sinks, by kind.
	extra map[string]int
}

// TestFastReadersAgreeWithTheTruth: over 20 cycles, per server, the kernel
// reader's bytes, its mean open connections and the load per connection the
// weighter derives from them agree with what the sinks received, within the
// tolerances below; `show sess all`'s figures are measured the same way
// and logged beside them (go test -v prints the table).
func TestFastReadersAgreeWithTheTruth(t *testing.T) {
	const nServers, cycles, period = 6, 20, 2 * time.Second
	front := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	var hcfg strings.Builder
	hcfg.WriteString(testenv.HAProxyDefaults)
	fmt.Fprintf(&hcfg, "frontend fe\n  bind %s\n  default_backend be\nbackend be\n  balance leastconn\n", front)
	sinks := map[string]*agreeSink{}
	var names []string
	for i := range nServers {
		name := fmt.Sprintf("s%d", i+1)
		sinks[name] = startAgreeSink(t, name)
		names = append(names, name)
		// check as a user has it: every 2 s (the default inter).
		fmt.Fprintf(&hcfg, "  server %s %s check\n", name, sinks[name].addr)
	}
	h := testenv.StartHAProxy(t, hcfg.String())
	hc, err := haproxy.New(haproxy.Config{Socket: h.Socket})
	require.NoError(t, err)
	hb := hc.Backend("be")
	log := slog.New(slog.DiscardHandler)
	chain := NewHAProxyChain(hb, hc, false, weighter.BytesIn, log)
	kr, sr := chain.kernel, chain.sessions

	ctx, stop := context.WithCancel(context.Background())
	var clients sync.WaitGroup
	t.Cleanup(func() {
		stop()
		clients.Wait()
	})
	// 18 long-lived clients, 1 to 18 kB/s; 6 that come and go, each
	// connection 1-5 s at 4-12 kB/s, then a new one.
	for i := range 18 {
		rate := 1000 * (i + 1)
		clients.Go(func() { _ = agreeClient(ctx, front, rate, 0) })
		time.Sleep(20 * time.Millisecond) // leastconn places each after the last
	}
	for i := range 6 {
		rng := rand.New(rand.NewPCG(uint64(i), 23))
		clients.Go(func() {
			for ctx.Err() == nil {
				life := time.Duration(1000+rng.IntN(4000)) * time.Millisecond
				if err := agreeClient(ctx, front, 4000+rng.IntN(8000), life); err != nil {
					return
				}
			}
		})
	}

	// Each cycle as the daemon's: the target's read (show servers state and
	// show stat), then the fast read; here both readers, the kernel first.
	var kernelAt, sessionsAt []time.Time
	readAll := func() agreeInterval {
		rctx := testenv.Context(t, 10*time.Second)
		servers, err := hb.Servers(rctx)
		require.NoError(t, err)
		k, err := kr.ReadLocal(rctx, servers)
		require.NoError(t, err)
		last := kr.local.Last()
		s, err := sr.ReadLocal(rctx, servers)
		require.NoError(t, err)
		kernelAt, sessionsAt = append(kernelAt, k.At), append(sessionsAt, s.At)
		iv := agreeInterval{kernel: map[string]agreeRead{}, sessions: map[string]agreeRead{}, extra: map[string]int{}}
		for name, c := range k.Servers {
			if !c.Reset {
				iv.kernel[name] = agreeRead{since: k.Since, at: k.At, rate: c.Rate, sessions: c.Sessions, open: last.Servers[name].Open}
			}
		}
		for name, c := range s.Servers {
			if !c.Reset && !s.Since.IsZero() {
				iv.sessions[name] = agreeRead{since: s.Since, at: s.At, rate: c.Rate, sessions: c.Sessions}
			}
		}
		for _, c := range last.Conns {
			if kind := sinks[c.Server].peer(c.Local, last.At); kind != "traffic" {
				iv.extra[kind]++
			}
		}
		return iv
	}

	time.Sleep(3 * time.Second) // every long-lived client placed and sending
	readAll()
	var got []agreeInterval
	tick := time.NewTicker(period)
	defer tick.Stop()
	for range cycles {
		<-tick.C
		got = append(got, readAll())
	}
	stop()
	clients.Wait()

	kernel := sumAgreement(names, sinks, got, true, kernelAt)
	sessions := sumAgreement(names, sinks, got, false, sessionsAt)
	logAgreement(t, names, kernel, sessions, got)
	for _, n := range names {
		k, s := kernel[n], sessions[n]
		require.Equal(t, cycles, k.spans, n)
		// Every byte it can read, to within the bytes in flight and the
		// sinks' own reads around the read's instant: a few 50 ms writes
		// over 40 s, well under 1 % on a quiet machine, 1.2 % measured on
		// a loaded one (make test's packages side by side on 2 cores: a
		// sink's read lags the instant it is taken at). A connection left
		// out (a quarter of a server's 4), or counted twice, is 25 % or more.
		assert.InEpsilon(t, k.readable, k.bytes, 0.02, "server %s: kernel bytes against what it could read", n)
		// The same bytes as show sess all: the two readers' spans differ by
		// the few milliseconds between them, at each end.
		assert.InEpsilon(t, s.bytes, k.bytes, 0.02, "server %s: kernel bytes against show sess all's", n)
		// Connections: a connection opened or closed between two reads
		// counts ½ (its open time is not in the table), unbiased over 20
		// intervals with 3-4 openings a server; health checks, when caught
		// open, add ½ twice. Measured within 3 %.
		assert.InEpsilon(t, k.truthSec, k.sessSec, 0.06, "server %s: kernel connection-seconds against the sink's", n)
	}
}

// agreeSum sums one reader's figures for a server against the truth.
type agreeSum struct {
	bytes, truthBytes float64 // over the reader's spans
	readable          float64 // the truth a reader of open connections can count
	sessSec, truthSec float64 // connection-seconds
	span              float64 // seconds
	perConnErr        []float64
	spans             int
}

// sumAgreement sums one reader's intervals, per server, against the sinks.
func sumAgreement(names []string, sinks map[string]*agreeSink, got []agreeInterval, kernel bool, reads []time.Time) map[string]*agreeSum {
	out := map[string]*agreeSum{}
	for _, n := range names {
		out[n] = &agreeSum{}
	}
	for _, iv := range got {
		m := iv.sessions
		if kernel {
			m = iv.kernel
		}
		for n, r := range m {
			a, sink := out[n], sinks[n]
			span := r.at.Sub(r.since).Seconds()
			tb := float64(sink.bytesAt(r.at) - sink.bytesAt(r.since))
			ts := sink.sessions(r.since, r.at)
			a.bytes += r.rate * span
			a.truthBytes += tb
			a.readable += float64(sink.readable(r.since, r.at, reads))
			a.sessSec += r.sessions * span
			a.truthSec += ts * span
			a.span += span
			a.spans++
			if truth := tb / span / max(ts, 1); truth > 0 {
				a.perConnErr = append(a.perConnErr, (r.rate/max(r.sessions, 1))/truth-1)
			}
		}
	}
	return out
}

// rms is the root mean square of the per-interval errors of the load per
// connection the weighter derives (rate / max(sessions, 1)) against the
// truth's.
func (a *agreeSum) rms() float64 {
	var s float64
	for _, e := range a.perConnErr {
		s += e * e
	}
	return math.Sqrt(s / float64(max(len(a.perConnErr), 1)))
}

// logAgreement prints the figures (go test -v).
func logAgreement(t *testing.T, names []string, kernel, sessions map[string]*agreeSum, got []agreeInterval) {
	t.Helper()
	extra := map[string]int{}
	for _, iv := range got {
		for k, v := range iv.extra {
			extra[k] += v
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "bytes over %d intervals (kernel, sessions, readable, sinks); mean open connections (kernel, sessions, sinks);\n", len(got))
	b.WriteString("load per connection, B/s (kernel, sessions, sinks); rms of its per-interval error (kernel, sessions)\n")
	for _, n := range names {
		k, s := kernel[n], sessions[n]
		fmt.Fprintf(&b, "%-3s | %8.0f %8.0f %8.0f %8.0f | %5.2f %5.2f %5.2f | %6.0f %6.0f %6.0f | %5.1f%% %5.1f%%\n", n,
			k.bytes, s.bytes, k.readable, k.truthBytes,
			k.sessSec/k.span, s.sessSec/s.span, k.truthSec/k.span,
			k.bytes/k.sessSec, s.bytes/s.sessSec, k.truthBytes/k.truthSec, 100*k.rms(), 100*s.rms())
	}
	fmt.Fprintf(&b, "kernel connections at a read that were not open traffic connections (of %d server reads): %v", len(got)*len(names), extra)
	t.Log("\n" + b.String())
}
