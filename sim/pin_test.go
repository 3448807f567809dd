package sim

import (
	"context"
	"fmt"
	"maps"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// placeClient opens n connections of client (rate 1, never ending) and
// returns the servers' names in the order they were picked.
func placeClient(b *backend, client, n int) []string {
	var out []string
	for range n {
		b.open(client, 1, 1e9, 0)
		out = append(out, b.servers[b.conns[len(b.conns)-1].server].name)
	}
	return out
}

// TestStickMatchBeatsDrainAndWeightZero: a client with an entry in the
// stick table goes to its server even drained (weight 0), as HAProxy's
// persistence rule does (checked by hand on 2.6 and 3.4); a client without
// one is balanced by leastconn and the weights; an entry naming a server
// that is down is ignored.
func TestStickMatchBeatsDrainAndWeightZero(t *testing.T) {
	b := newBackend(3, initialWeight, pickLeastconn)
	b.pins = map[int]int{5: 2}
	b.setWeight(2, 0)
	assert.Equal(t, []string{"s3", "s3", "s3"}, placeClient(b, 5, 3), "the pinned client, on its drained server")
	assert.Equal(t, []string{"s1", "s2", "s1", "s2"}, placeClient(b, 7, 4), "another client: leastconn over the weighted servers")
	assert.Equal(t, 3, b.stuck)
	b.servers[2].up = false
	assert.Equal(t, []string{"s1"}, placeClient(b, 5, 1), "the entry names a server that is down: balanced")

	plain := newBackend(3, initialWeight, pickLeastconn)
	plain.setWeight(2, 0)
	assert.Equal(t, []string{"s1", "s2"}, placeClient(plain, 5, 2), "no stick table: the weights alone")
}

// TestSimTargetPins: the model's backend is a weighter.PinTarget; one batch
// clears, then writes the weights, then sets, and a write HAProxy would
// refuse fails alone as a *weighter.PinError.
func TestSimTargetPins(t *testing.T) {
	ctx := context.Background()
	b := newBackend(3, initialWeight, pickLeastconn)
	none := &simTarget{b: b}
	_, err := none.Pins(ctx)
	require.ErrorIs(t, err, weighter.ErrNoPinTable)
	require.ErrorIs(t, none.SetWeightsAndPins(ctx, nil, weighter.PinChanges{Set: []weighter.Pin{{Client: "10.0.0.5", Server: "s1"}}}), weighter.ErrNoPinTable)

	b.pins = map[int]int{}
	tg := &simTarget{b: b}
	require.NoError(t, tg.SetWeightsAndPins(ctx, nil, weighter.PinChanges{Set: []weighter.Pin{
		{Client: "10.0.0.5", Server: "s1"}, {Client: "10.0.1.2", Server: "s2"}}}))
	err = tg.SetWeightsAndPins(ctx, []weighter.Change{{Server: "s3", Weight: 0}}, weighter.PinChanges{
		Clear: []string{"10.0.0.5"},
		Set:   []weighter.Pin{{Client: "10.0.0.9", Server: "s3"}, {Client: "10.0.0.7", Server: "s9"}, {Client: "192.0.2.1", Server: "s1"}},
	})
	var pe *weighter.PinError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "10.0.0.7", pe.Client, "the first refused write: an unknown server")
	assert.ErrorContains(t, err, "192.0.2.1")
	assert.Equal(t, 0, b.servers[2].weight, "the weights of the batch are written")
	got, err := tg.Pins(ctx)
	require.NoError(t, err)
	assert.Equal(t, weighter.PinTable{Name: simBackend, Size: pinTableSize, Used: 2, Pins: []weighter.Pin{
		{Client: "10.0.0.9", Server: "s3"}, {Client: "10.0.1.2", Server: "s2"}}}, got)
	assert.Equal(t, []string{"s3"}, placeClient(b, 9, 1), "pinned in the batch that drained its server")
}

// TestRestartEmptiesPinTable: a restart of HAProxy empties its stick table
// (entries live in the process); a reload with a peers section keeps it.
func TestRestartEmptiesPinTable(t *testing.T) {
	for _, peers := range []bool{false, true} {
		sc := LongLivedScenario()
		sc.Duration, sc.Warmup = 2*time.Minute, 0
		sc.Events = []Event{{At: time.Minute, Kind: EventRestart, Peers: peers}}
		str := newStream(sc)
		m, err := newModel(sc, Pipeline{Name: "leastconn", Kind: KindLeastconn}, str, owners(sc, str))
		require.NoError(t, err)
		m.lbs[0].b.pins = map[int]int{3: 1, 4: 2}
		_, err = m.run()
		require.NoError(t, err)
		if peers {
			assert.Len(t, m.lbs[0].b.pins, 2, "a reload with peers keeps the table")
		} else {
			assert.Empty(t, m.lbs[0].b.pins, "a restart starts with an empty table")
		}
	}
}

// TestReaderListsClients: the fast reader lists each client address once,
// its connections and the sum of their rates in bytes/s; a connection new
// since the previous read has no rate yet, a client with only new ones NaN.
func TestReaderListsClients(t *testing.T) {
	sc := DefaultScenario()
	lb := &balancer{b: newBackend(2, initialWeight, pickLeastconn)}
	m := &model{sc: sc, signal: SignalLive}
	r := newSimReader(m, lb, Pipeline{})
	r.clients = true
	open := func(client int, rate float64) {
		lb.b.open(client, rate, 1e9, m.now)
		lb.since = append(lb.since, m.now)
		lb.client = append(lb.client, client)
	}
	open(1, 10)
	open(1, 20)
	open(258, 5)
	read := func() []weighter.Client {
		got, err := r.ReadLocal(context.Background(), testenv.Servers("s1", "s2"))
		require.NoError(t, err)
		return got.Clients
	}
	first := read()
	require.Len(t, first, 2)
	assert.True(t, math.IsNaN(first[0].Rate) && math.IsNaN(first[1].Rate), "nothing measured at the first read")
	m.now = 2
	open(1, 40)
	open(7, 1)
	got := read()
	require.Len(t, got, 3)
	assert.True(t, math.IsNaN(got[1].Rate), "client 7: only a new connection")
	got[1].Rate = 0
	assert.Equal(t, []weighter.Client{
		{Addr: "10.0.0.1", Rate: 30 * bytesPerLine, Conns: 3},
		{Addr: "10.0.0.7", Conns: 1},
		{Addr: "10.0.1.2", Rate: 5 * bytesPerLine, Conns: 1},
	}, got, "client 1: its two older connections' rates, the new one counted but not measured")
}

func TestClientIPRoundTrip(t *testing.T) {
	for _, c := range []int{0, 1, 255, 256, 70000, 1<<24 - 1} {
		assert.Equal(t, fmt.Sprintf("10.%d.%d.%d", c>>16&255, c>>8&255, c&255), clientIP(c), "the address the shed cooldown has always keyed on")
		got, ok := parseClientIP(clientIP(c))
		assert.True(t, ok)
		assert.Equal(t, c, got)
	}
	for _, bad := range []string{"", "10.0.0", "10.0.0.256", "11.0.0.1", "10.0.0.01", "10.0.0.1:80", "::1"} {
		_, ok := parseClientIP(bad)
		assert.False(t, ok, bad)
	}
}

func TestCarbonScenarioFile(t *testing.T) {
	sc, err := LoadScenario("../examples/scenarios/pin/carbon.yaml")
	require.NoError(t, err)
	assert.Equal(t, CarbonScenario(), sc)
	str := newStream(sc)
	require.Len(t, str.arrivals, 8, "the fixed clients alone")
	m, err := newModel(sc, Pipeline{Name: "leastconn", Kind: KindLeastconn}, str, owners(sc, str))
	require.NoError(t, err)
	require.NoError(t, m.advance(0))
	var loads []float64
	for _, s := range m.lbs[0].b.servers {
		loads = append(loads, s.load)
	}
	assert.Equal(t, []float64{4000, 260, 190, 140}, loads, "both 2,000/s relays on s1, the others where leastconn left them")
}

// TestPinArmsMoveTheCarbonRelays: on the carbon scenario (both 2,000/s relays
// on s1, nothing connects unless shed), the shipped daemon pinning and
// shedding pins both heavy relays, on different servers, through its own
// cycle, and sheds one of them onto its pin: max/mean falls from 3.48 to
// under 2 within five minutes; pinning without shedding moves nothing.
func TestPinArmsMoveTheCarbonRelays(t *testing.T) {
	sc := CarbonScenario()
	sc.Duration = 5 * time.Minute
	shed := weighter.DefaultShed()
	for _, pl := range []Pipeline{
		ShippedPinPipeline(ShippedPinName, weighter.DefaultPin(), nil),
		ShippedPinPipeline(ShippedPinShedName, weighter.DefaultPin(), &shed),
	} {
		str := newStream(sc)
		m, err := newModel(sc, pl, str, owners(sc, str))
		require.NoError(t, err)
		var planned int
		m.onCycle = func(_ *balancer, c weighter.Cycle) {
			require.NoError(t, c.Err)
			if c.Plan.Pins != nil {
				planned += len(c.Plan.Pins.Changes.Set)
			}
		}
		tr, err := m.run()
		require.NoError(t, err)
		b := m.lbs[0].b
		heavy := map[int]bool{}
		for client, server := range b.pins {
			if str.arrivals[client].Rate == 2000 {
				heavy[server] = true
			}
		}
		assert.Len(t, heavy, 2, "%s: both 2,000/s relays pinned, on two servers", pl.Name)
		assert.Positive(t, planned, "%s: the pins are the cycles' plans", pl.Name)
		last, _ := ratio(tr.windows[len(tr.windows)-1].loads)
		if pl.Shed == nil {
			assert.InDelta(t, 3.486, last, 0.01, "%s: a pin moves no open connection", pl.Name)
			continue
		}
		assert.Positive(t, b.stuck, "%s: a shed relay reconnected to its pin", pl.Name)
		assert.Less(t, last, 2.0, "%s: max/mean at the end", pl.Name)
	}
}

// TestPinArmsRepinAfterRestart: a restart closes every connection, a
// reconnect storm: at its next cycle the daemon pins every relay it measured
// before and not back yet, and the two 2,000/s relays end up on two
// servers. A relay back before that cycle is balanced as any; with a
// peers section (the table kept) it lands on its pin from before.
func TestPinArmsRepinAfterRestart(t *testing.T) {
	for _, peers := range []bool{false, true} {
		sc := CarbonScenario()
		sc.Duration = 4 * time.Minute
		restart := (3 * time.Minute).Seconds()
		sc.Events = []Event{{At: 3 * time.Minute, Kind: EventRestart, Over: 5 * time.Second, Peers: peers}}
		str := newStream(sc)
		m, err := newModel(sc, ShippedPinPipeline(ShippedPinName, weighter.DefaultPin(), nil), str, owners(sc, str))
		require.NoError(t, err)
		var before map[int]int
		emptied, stormAt := false, math.Inf(1)
		m.onStep = func(m *model, now float64) {
			b := m.lbs[0].b
			switch {
			case now < restart:
				before = maps.Clone(b.pins)
			case now < restart+0.05: // the step of the restart, before its cycle
				emptied = len(b.pins) == 0
			}
		}
		m.onCycle = func(lb *balancer, c weighter.Cycle) {
			if c.Plan.Pins != nil && c.Plan.Pins.StormBegan {
				assert.True(t, math.IsInf(stormAt, 1), "peers %v: a second storm at %.1f s", peers, m.now)
				assert.GreaterOrEqual(t, m.now, restart, "peers %v: a storm before the restart", peers)
				assert.Positive(t, c.Plan.Pins.Storm, "peers %v: the storm pinned no client", peers)
				stormAt = m.now
			}
		}
		_, err = m.run()
		require.NoError(t, err)
		lb := m.lbs[0]
		require.NotEmpty(t, before, "pins before the restart")
		assert.Equal(t, !peers, emptied, "peers %v: the restart emptied the table", peers)
		require.LessOrEqual(t, stormAt, restart+2.01, "peers %v: the storm pinned within a cycle", peers)
		heavyOn := map[int]bool{}
		early := 0
		for id, c := range lb.b.conns {
			if !c.open || lb.since[id] <= restart {
				continue
			}
			if str.arrivals[c.client].Rate == 2000 {
				heavyOn[c.server] = true
			}
			if server, pinned := before[c.client]; peers && pinned && lb.since[id] < stormAt {
				assert.Equal(t, server, c.server, "client %d back at %.1f s, before the storm's pins: on its pin from before", c.client, lb.since[id]-restart)
				early++
			}
		}
		assert.Len(t, heavyOn, 2, "peers %v: the two 2,000/s relays on two servers after the storm", peers)
		t.Logf("peers %v: storm pinned %.1f s after the restart; %d pinned relays back before it", peers, stormAt-restart, early)
	}
}

// TestReturningClients: with returning on, no client arrives after the
// initial ones, and each whose connection ends comes back from the same
// address at its rate within 2 s, the same in every pipeline.
func TestReturningClients(t *testing.T) {
	sc := DefaultScenario()
	sc.Duration, sc.Warmup, sc.Events, sc.Returning = 3*time.Minute, time.Minute, nil, true
	str := newStream(sc)
	require.Len(t, str.arrivals, sc.Connections, "the initial clients alone")
	var backs [][]float64
	for _, pl := range []Pipeline{{Name: "leastconn", Kind: KindLeastconn}, {Name: "oracle", Kind: KindOracle}} {
		m, err := newModel(sc, pl, str, owners(sc, str))
		require.NoError(t, err)
		_, err = m.run()
		require.NoError(t, err)
		lb := m.lbs[0]
		last := map[int]int{} // client → its previous connection
		var at []float64
		for id, c := range lb.b.conns {
			if prev, ok := last[c.client]; ok {
				p := lb.b.conns[prev]
				assert.Equal(t, p.rate, c.rate, "client %d back at its rate", c.client)
				gap := lb.since[id] - p.end
				assert.True(t, gap >= reconnectMin && gap <= reconnectMax, "client %d back %.2f s after its end", c.client, gap)
				at = append(at, lb.since[id])
			}
			last[c.client] = id
		}
		require.NotEmpty(t, at, "clients came back")
		backs = append(backs, at)
	}
	assert.Equal(t, backs[0], backs[1], "the returns are the same whatever the placement")
}
