package main

import (
	"context"
	"math"
	"math/rand/v2"
	"net"
	"sync"
	"time"
)

// trafficConfig shapes the generated load: long-lived connections with heavy-tailed
// (lognormal) rates and exponential lifetimes, like clients streaming metrics.
type trafficConfig struct {
	Addrs    []string      // HAProxy frontends: each client connects to all, same rate
	Conns    int           // connections kept open
	Median   float64       // median rate of one connection, bytes/s
	Sigma    float64       // lognormal sigma: 1.5 makes a few connections 10-50x the median
	MaxRate  float64       // cap of one connection's rate, bytes/s
	Lifetime time.Duration // mean lifetime of a connection
	Seed     uint64
}

const tick = 100 * time.Millisecond

// runTraffic keeps cfg.Conns connections busy until ctx ends, then waits for them to close.
func runTraffic(ctx context.Context, cfg trafficConfig) {
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

// client plays one client after another: when a connection's life ends, a new client
// with a fresh rate connects, so the population stays at about Conns.
func client(ctx context.Context, cfg trafficConfig, rng *rand.Rand) {
	// Spread the first connections over one tick so HAProxy sees them arrive one by one.
	if !sleepCtx(ctx, time.Duration(rng.Int64N(int64(tick)))) {
		return
	}
	for ctx.Err() == nil {
		rate := math.Min(cfg.Median*math.Exp(cfg.Sigma*rng.NormFloat64()), cfg.MaxRate)
		life := time.Duration(rng.ExpFloat64() * float64(cfg.Lifetime))
		if err := stream(ctx, cfg.Addrs, rate, life); err != nil && !sleepCtx(ctx, tick) {
			return
		}
	}
}

// stream sends rate bytes/s over one connection to each address for life, in one write
// per tick.
func stream(ctx context.Context, addrs []string, rate float64, life time.Duration) error {
	d := net.Dialer{Timeout: 2 * time.Second}
	conns := make([]net.Conn, 0, len(addrs))
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for _, a := range addrs {
		c, err := d.DialContext(ctx, "tcp", a)
		if err != nil {
			return err
		}
		conns = append(conns, c)
	}
	end := time.NewTimer(life)
	defer end.Stop()
	t := time.NewTicker(tick)
	defer t.Stop()
	buf := make([]byte, int(rate*tick.Seconds())+1)
	owed := 0.0
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-end.C:
			return nil
		case <-t.C:
			owed += rate * tick.Seconds()
			n := int(owed)
			owed -= float64(n)
			for _, c := range conns {
				_ = c.SetWriteDeadline(time.Now().Add(2 * time.Second))
				if _, err := c.Write(buf[:min(n, len(buf))]); err != nil {
					return err
				}
			}
		}
	}
}

// sleepCtx sleeps for d and reports whether ctx is still alive.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
