package lvs

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/cloudflare/ipvs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// tcpCounts is a TCP service with three real servers whose active
// connections the test sets, read at a clock the test moves.
func tcpCounts(t *testing.T) (*Service, *fakeConn, *time.Time) {
	t.Helper()
	svc := ipvs.Service{Address: netip.MustParseAddr("10.0.0.1"), Port: 80, Protocol: ipvs.TCP, Family: ipvs.INET}
	f := &fakeConn{svc: svc, inactive: 9, // TIME_WAIT and the like: not load
		dests:   []ipvs.Destination{dr("10.0.2.1:80", 100), dr("10.0.2.2:80", 100), dr("10.0.2.3:80", 100)},
		perDest: map[netip.Addr]uint32{}}
	s, err := newService(Config{Service: "tcp://10.0.0.1:80",
		Servers: map[string]string{"a": "10.0.2.1:80", "b": "10.0.2.2:80", "c": "10.0.2.3:80"}}, f, nil, nil)
	require.NoError(t, err)
	now := time.Unix(1_800_000_000, 0)
	s.count.nowFor = func() time.Time { return now }
	return s, f, &now
}

func setActive(f *fakeConn, a, b, c uint32) {
	f.perDest[netip.MustParseAddr("10.0.2.1")] = a
	f.perDest[netip.MustParseAddr("10.0.2.2")] = b
	f.perDest[netip.MustParseAddr("10.0.2.3")] = c
}

// The fast count: per server, the mean active connections over the span as
// rate and sessions, their integral as the counter; the first read of a
// server has no span (Reset).
func TestReadLocalCountsActiveConnections(t *testing.T) {
	s, f, now := tcpCounts(t)
	ctx := context.Background()
	setActive(f, 4, 10, 0)
	first, err := s.ReadLocal(ctx, nil)
	require.NoError(t, err)
	assert.True(t, first.Counts)
	assert.True(t, first.Since.IsZero())
	for _, name := range []string{"a", "b", "c"} {
		assert.True(t, first.Servers[name].Reset, name)
	}
	assert.Equal(t, 10.0, first.Servers["b"].Sessions)

	*now = now.Add(2 * time.Second)
	setActive(f, 6, 10, 2)
	got, err := s.ReadLocal(ctx, nil)
	require.NoError(t, err)
	assert.Equal(t, first.At, got.Since)
	want := map[string]float64{"a": 5, "b": 10, "c": 1}
	for name, mean := range want {
		c := got.Servers[name]
		assert.False(t, c.Reset, name)
		assert.Equal(t, mean, c.Rate, name)
		assert.Equal(t, mean, c.Sessions, name)
		assert.Equal(t, 2*mean, c.Bytes-first.Servers[name].Bytes, "connection-seconds of %s", name)
	}

	// A server that leaves and comes back starts afresh.
	f.dests = f.dests[:2]
	*now = now.Add(2 * time.Second)
	_, err = s.ReadLocal(ctx, nil)
	require.NoError(t, err)
	f.dests = append(f.dests, dr("10.0.2.3:80", 100))
	*now = now.Add(2 * time.Second)
	back, err := s.ReadLocal(ctx, nil)
	require.NoError(t, err)
	assert.True(t, back.Servers["c"].Reset)
	assert.False(t, back.Servers["a"].Reset)
}

// externalPerConnection is a metrics source whose servers carry, per active
// connection, a: 10, b: 20, c: 10 (b's clients cost twice as much), each
// point over the 30 s before it.
type externalPerConnection struct {
	now  *time.Time
	conn map[string]float64
}

func (e *externalPerConnection) Fetch(context.Context, []weighter.ServerState) (weighter.Loads, error) {
	out := weighter.Loads{}
	for name, per := range map[string]float64{"a": 10, "b": 20, "c": 10} {
		out[name] = weighter.Series{{Time: *e.now, Value: per * e.conn[name]}}
	}
	return out, nil
}

// Through the IPVS interface (the fake kernel): the fast count calibrated by
// the source weighs each real server by its load per connection, which the
// kernel's least-connection scheduler multiplies by the live count. b's
// connections cost twice as much, so b ends with about half the weight, while
// the counts alone would make every server alike.
func TestCountCalibratedWeighsIPVS(t *testing.T) {
	s, f, now := tcpCounts(t)
	setActive(f, 10, 10, 10)
	ext := &externalPerConnection{now: now, conn: map[string]float64{"a": 10, "b": 10, "c": 10}}
	fresh, err := weighter.NewFresh(weighter.FreshConfig{Fast: s, External: ext, Calibrate: true,
		Calibration: weighter.DefaultCalibration(30 * time.Second), Refresh: 15 * time.Second,
		Now: func() time.Time { return *now }})
	require.NoError(t, err)
	p := weighter.DefaultPolicy()
	ctl, err := weighter.NewController(p)
	require.NoError(t, err)
	b := &weighter.Weigher{Name: "ipvs", Source: fresh, Target: s, Controller: ctl}
	var c weighter.Cycle
	for range 150 { // 5 min at 2 s
		*now = now.Add(2 * time.Second)
		c = weighter.RunCycle(context.Background(), b, *now, true)
		require.Equal(t, weighter.ResultOK, c.Result, "%v", c.Err)
	}
	require.NotNil(t, c.Signal)
	assert.Equal(t, weighter.PipelineCalibrated, c.Signal.Pipeline)
	assert.Zero(t, c.Signal.Uncalibrated)
	w := map[string]uint32{}
	for _, d := range f.dests {
		w[d.Address.String()] = d.Weight
	}
	a, bw := float64(w["10.0.2.1"]), float64(w["10.0.2.2"])
	assert.InDelta(t, 0.5, bw/a, 0.1, "weights %v", w)
	assert.Equal(t, w["10.0.2.1"], w["10.0.2.3"], "a and c cost the same per connection: %v", w)
	for _, ps := range c.Plan.Servers {
		assert.Contains(t, ps.Reason, "fast 10 connections × calibration", ps.Server)
	}
}
