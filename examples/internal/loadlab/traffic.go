package loadlab

import (
	"context"
	"math"
	"math/rand/v2"
	"net"
	"sync"
	"time"
)

// TrafficConfig shapes the generated load: long-lived connections with heavy-tailed
// (lognormal) rates and exponential lifetimes, like clients streaming metrics.
type TrafficConfig struct {
	Addrs    []string      // HAProxy frontends: each client connects to all, same rate
	Conns    int           // connections kept open
	Median   float64       // median rate of one connection, bytes/s
	Sigma    float64       // lognormal sigma: 1.5 makes a few connections 10-50x the median
	MaxRate  float64       // cap of one connection's rate, bytes/s
	Lifetime time.Duration // mean lifetime of a connection
	Seed     uint64

	// Place, if set, gives each client one more connection, to an address it chooses
	// knowing the client's rate (a placement that knows the load); release is called
	// once that connection has ended.
	Place func(rate float64) (addr string, release func())
	// Payload, if set, is the pattern every connection sends, repeated without a break
	// across writes (e.g. one datapoint line ending in '\n'); by default, zero bytes.
	Payload []byte
}

// Tick is how often a connection writes what it owes.
const Tick = 100 * time.Millisecond

// RunTraffic keeps cfg.Conns connections busy until ctx ends, then waits for them to close.
// Client i draws its rates and lifetimes from its own stream of cfg.Seed, so the same seed
// gives the same clients.
func RunTraffic(ctx context.Context, cfg TrafficConfig) {
	var wg sync.WaitGroup
	for i := range cfg.Conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client(ctx, cfg, rand.New(rand.NewPCG(cfg.Seed, uint64(i))))
		}()
	}
	wg.Wait()
}

// DrawClient draws one client: a lognormal rate (median, sigma, capped at maxRate) and
// an exponential life of mean meanLife, in that order from rng. The lab's and the
// production scenarios' clients both draw here, so the two worlds share one population.
func DrawClient(rng *rand.Rand, median, sigma, maxRate float64, meanLife time.Duration) (float64, time.Duration) {
	rate := math.Min(median*math.Exp(sigma*rng.NormFloat64()), maxRate)
	return rate, time.Duration(rng.ExpFloat64() * float64(meanLife))
}

// client plays one client after another: when a connection's life ends, a new client
// with a fresh rate connects, so the population stays at about Conns.
func client(ctx context.Context, cfg TrafficConfig, rng *rand.Rand) {
	// Spread the first connections over one tick so HAProxy sees them arrive one by one.
	if !SleepCtx(ctx, time.Duration(rng.Int64N(int64(Tick)))) {
		return
	}
	for ctx.Err() == nil {
		rate, life := DrawClient(rng, cfg.Median, cfg.Sigma, cfg.MaxRate, cfg.Lifetime)
		if err := stream(ctx, cfg, rate, life); err != nil && !SleepCtx(ctx, Tick) {
			return
		}
	}
}

// stream sends rate bytes/s over one connection to each address (and to the placed one)
// for life, in one write per tick.
func stream(ctx context.Context, cfg TrafficConfig, rate float64, life time.Duration) error {
	d := net.Dialer{Timeout: 2 * time.Second}
	conns := make([]net.Conn, 0, len(cfg.Addrs)+1)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for _, a := range cfg.Addrs {
		c, err := d.DialContext(ctx, "tcp", a)
		if err != nil {
			return err
		}
		conns = append(conns, c)
	}
	if cfg.Place != nil {
		addr, release := cfg.Place(rate)
		defer release()
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return err
		}
		conns = append(conns, c)
	}
	end := time.NewTimer(life)
	defer end.Stop()
	t := time.NewTicker(Tick)
	defer t.Stop()
	size := int(rate*Tick.Seconds()) + 1
	buf := make([]byte, size+len(cfg.Payload))
	for i := 0; len(cfg.Payload) > 0 && i < len(buf); i += len(cfg.Payload) {
		copy(buf[i:], cfg.Payload)
	}
	off := 0 // where in the payload the next write starts
	owed := 0.0
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-end.C:
			return nil
		case <-t.C:
			owed += rate * Tick.Seconds()
			n := int(owed)
			owed -= float64(n)
			n = min(n, size)
			for _, c := range conns {
				_ = c.SetWriteDeadline(time.Now().Add(2 * time.Second))
				if _, err := c.Write(buf[off : off+n]); err != nil {
					return err
				}
			}
			if len(cfg.Payload) > 0 {
				off = (off + n) % len(cfg.Payload)
			}
		}
	}
}

// SleepCtx sleeps for d and reports whether ctx is still alive.
func SleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
