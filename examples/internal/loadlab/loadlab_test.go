package loadlab

import (
	"context"
	"math"
	"sync/atomic"
	"testing"
	"time"
)

// Every client sends the payload without a break across writes, to each address and to
// the placed one, and releases its placement when the connection ends.
func TestTrafficPayloadAndPlace(t *testing.T) {
	sinks, err := StartSinks(2, true)
	if err != nil {
		t.Fatal(err)
	}
	defer CloseSinks(sinks)
	payload := []byte("0123456789abcdefghijklmnopqrstuvwxyz01234567890ab\n") // 50 bytes
	var placed, released atomic.Int64
	cfg := TrafficConfig{
		Addrs: []string{sinks[0].Addr()}, Conns: 4, Median: 3000, Sigma: 0.5, MaxRate: 10000,
		Lifetime: 400 * time.Millisecond, Seed: 1, Payload: payload,
		Place: func(float64) (string, func()) {
			placed.Add(1)
			return sinks[1].Addr(), func() { released.Add(1) }
		},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	RunTraffic(ctx, cfg)
	time.Sleep(100 * time.Millisecond) // the sinks read what is in flight
	for _, s := range sinks {
		b, l := s.Bytes(), s.Lines()
		if b == 0 || math.Abs(float64(b)/50-float64(l)) > 1.5*float64(placed.Load()) {
			t.Errorf("%s: %d bytes, %d lines, want one line per 50 bytes (a partial line per connection at most)", s.Name, b, l)
		}
	}
	if placed.Load() < int64(cfg.Conns) || released.Load() != placed.Load() {
		t.Errorf("placed %d, released %d: want at least one per client, each released", placed.Load(), released.Load())
	}
	if MaxOverMean([]float64{10, 20, 30, 40}) != 1.6 || !math.IsNaN(MaxOverMean(nil)) {
		t.Error("MaxOverMean")
	}
}

func TestLogFields(t *testing.T) {
	got := LogFields(`time=2026-12-02T07:23:02.473Z level=INFO msg="session shed" client=127.200.0.2:52233 reason="a \"quoted\" word" n=3`)
	want := map[string]string{"time": "2026-12-02T07:23:02.473Z", "level": "INFO", "msg": "session shed",
		"client": "127.200.0.2:52233", "reason": `a "quoted" word`, "n": "3"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: got %q, want %q", k, got[k], v)
		}
	}
}
