package haproxy

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var localT0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// ds is a stream of be on server, with totals in and out and age.
func ds(id, serial uint64, server string, in, out uint64, age time.Duration) dumpedStream {
	return dumpedStream{key: streamKey{id, serial}, backend: "be", server: server, in: in, out: out, age: age}
}

// dumpAt is a dump read at localT0 + sec seconds whose newest serial is serial.
func dumpAt(sec float64, serial uint64, streams ...dumpedStream) localDump {
	return localDump{at: localT0.Add(time.Duration(sec * float64(time.Second))), streams: streams, maxSerial: serial, total: len(streams) + 1}
}

func readIn(a *localAcc) StreamsReading {
	return a.reading("be", LocalQuery{Counter: CounterBytesIn, Open: true}, 3)
}

func TestLocalAccCountsEachByteOnce(t *testing.T) {
	a := newLocalAcc()
	a.apply(dumpAt(0, 100, ds(1, 10, "s1", 1000, 50, time.Minute), ds(2, 11, "s2", 0, 0, time.Second)))
	r := readIn(a)
	assert.Equal(t, float64(1000), r.Servers["s1"].Bytes, "the first dump counts what open streams have forwarded so far")
	assert.True(t, r.Servers["s1"].Reset)
	assert.Zero(t, r.Servers["s1"].Rate, "no rate without an earlier dump")
	assert.Equal(t, 1.0, r.Servers["s1"].Sessions, "at the first dump, the streams open")
	assert.True(t, r.Since.IsZero())

	// s1's stream grows by 400; s2's stream ends and address 2 is taken by a
	// new stream (serial 12) that has sent 300 bytes: counted from 0.
	a.apply(dumpAt(2, 120, ds(1, 10, "s1", 1400, 50, time.Minute), ds(2, 12, "s2", 300, 0, 500*time.Millisecond)))
	r = readIn(a)
	assert.Equal(t, float64(1400), r.Servers["s1"].Bytes)
	assert.Equal(t, 200.0, r.Servers["s1"].Rate)
	assert.Equal(t, float64(300), r.Servers["s2"].Bytes)
	assert.False(t, r.Servers["s1"].Reset)
	assert.Equal(t, localT0, r.Since)
	// s2: the old stream ended in the span (counts half), the new one was
	// open for 0.5 s of 2 s.
	assert.InDelta(t, 0.5+0.25, r.Servers["s2"].Sessions, 1e-9)
	assert.Equal(t, 1, r.OpenAt["s2"])

	// s1's stream is not listed (torn) and comes back: only its growth counts.
	a.apply(dumpAt(4, 130, ds(2, 12, "s2", 300, 0, time.Second)))
	a.apply(dumpAt(6, 140, ds(1, 10, "s1", 1500, 60, time.Minute), ds(2, 12, "s2", 300, 0, time.Second)))
	r = readIn(a)
	assert.Equal(t, float64(1500), r.Servers["s1"].Bytes)
	assert.Equal(t, 50.0, r.Servers["s1"].Rate)
	out := a.reading("be", LocalQuery{Counter: CounterBytesOut}, 3)
	assert.Equal(t, float64(60), out.Servers["s1"].Bytes)
	both := a.reading("be", LocalQuery{Counter: LocalBoth}, 3)
	assert.Equal(t, float64(1560), both.Servers["s1"].Bytes)

	// Both streams close: the counters keep what was counted.
	a.apply(dumpAt(8, 150))
	r = readIn(a)
	assert.Equal(t, float64(1500), r.Servers["s1"].Bytes)
	assert.Equal(t, float64(300), r.Servers["s2"].Bytes)
	assert.Zero(t, r.Servers["s1"].Rate)
	assert.Equal(t, 0.5, r.Servers["s1"].Sessions, "ended during the span")
	assert.Zero(t, r.OpenAt["s1"])
}

func TestLocalAccServerChosenLater(t *testing.T) {
	a := newLocalAcc()
	// Queued or held: no server yet, 200 bytes already read from the client.
	a.apply(dumpAt(0, 5, ds(1, 1, "", 200, 0, time.Second)))
	r := a.reading("be", LocalQuery{Servers: []string{"s1"}}, 3)
	assert.Equal(t, float64(0), r.Servers["s1"].Bytes)
	assert.Equal(t, 0.0, r.Servers["s1"].Sessions)
	a.apply(dumpAt(2, 6, ds(1, 1, "s1", 900, 0, 3*time.Second)))
	r = a.reading("be", LocalQuery{Servers: []string{"s1"}}, 3)
	assert.Equal(t, float64(900), r.Servers["s1"].Bytes, "all of it goes to the server chosen")
	assert.Equal(t, 450.0, r.Servers["s1"].Rate)
	assert.False(t, r.Servers["s1"].Reset, "reported (idle) before")
	assert.Equal(t, 1.0, r.Servers["s1"].Sessions)
}

func TestLocalAccRestart(t *testing.T) {
	a := newLocalAcc()
	a.apply(dumpAt(0, 500, ds(0xa0, 400, "s1", 5000, 0, time.Minute)))
	a.apply(dumpAt(2, 510, ds(0xa0, 400, "s1", 6000, 0, time.Minute)))
	r := readIn(a)
	require.Equal(t, float64(6000), r.Servers["s1"].Bytes)
	assert.False(t, a.restarted)
	// A new process: stream numbers start again, and a new stream even
	// takes the old one's address and serial, with a smaller total.
	a.apply(dumpAt(4, 3, ds(0xa0, 400, "s1", 700, 0, time.Second)))
	r = readIn(a)
	assert.True(t, a.restarted)
	assert.Equal(t, float64(6700), r.Servers["s1"].Bytes, "the counter goes on; the new stream counts from 0")
	assert.False(t, r.Servers["s1"].Reset)
	a.apply(dumpAt(6, 9, ds(0xa0, 400, "s1", 900, 0, time.Second)))
	r = readIn(a)
	assert.False(t, a.restarted)
	assert.Equal(t, float64(6900), r.Servers["s1"].Bytes)
}

// HAProxy's stream counter is 32 bits: on a busy balancer it wraps within
// days while the long-lived streams opened before go on. The newest serial
// goes back, but that is not a new process: those streams must not be
// counted again from 0.
func TestLocalAccSerialWrap(t *testing.T) {
	const top = 1<<32 - 10
	a := newLocalAcc()
	a.apply(dumpAt(0, top, ds(0xa0, top-5000, "s1", 5000, 0, time.Hour), ds(0xb0, top-10, "s2", 800, 0, time.Minute)))
	a.apply(dumpAt(2, top+5, ds(0xa0, top-5000, "s1", 6000, 0, time.Hour), ds(0xb0, top-10, "s2", 900, 0, time.Minute)))
	readIn(a)
	require.False(t, a.restarted)
	// The counter wrapped: the CLI's stream is #3, the old streams go on.
	a.apply(dumpAt(4, 3, ds(0xa0, top-5000, "s1", 6400, 0, time.Hour), ds(0xb0, top-10, "s2", 1000, 0, time.Minute)))
	r := readIn(a)
	assert.False(t, a.restarted)
	assert.Equal(t, float64(6400), r.Servers["s1"].Bytes, "only the growth counts")
	assert.Equal(t, 200.0, r.Servers["s1"].Rate)
	assert.Equal(t, float64(1000), r.Servers["s2"].Bytes)
	// The newest of the old streams ends: the newest serial goes back again.
	a.apply(dumpAt(6, 8, ds(0xa0, top-5000, "s1", 6600, 0, time.Hour)))
	r = readIn(a)
	assert.False(t, a.restarted)
	assert.Equal(t, float64(6600), r.Servers["s1"].Bytes)
	assert.Equal(t, 100.0, r.Servers["s1"].Rate)
}

func TestLocalAccDead(t *testing.T) {
	a := newLocalAcc()
	idle := ds(1, 1, "s1", 100, 0, time.Minute)
	a.apply(dumpAt(0, 2, idle))
	for i := 1; i <= 3; i++ {
		assert.NoError(t, readIn(a).Dead, "after %d still dumps", i-1)
		a.apply(dumpAt(float64(2*i), uint64(2+i), idle))
	}
	r := readIn(a)
	require.ErrorIs(t, r.Dead, ErrLocalSignalDead)
	assert.ErrorContains(t, r.Dead, "backend be: 1 streams open, no bytes_in total moved over the last 3 dumps (6s)")
	// bytes_out never moved either; both/out are as dead.
	assert.ErrorIs(t, a.reading("be", LocalQuery{Counter: LocalBoth}, 3).Dead, ErrLocalSignalDead)
	// Bytes move: alive again at once.
	a.apply(dumpAt(8, 10, ds(1, 1, "s1", 101, 0, time.Minute)))
	assert.NoError(t, readIn(a).Dead)
	// No stream open: nothing expected to move, not dead.
	for i := range 5 {
		a.apply(dumpAt(float64(10+2*i), uint64(20+i)))
	}
	assert.NoError(t, readIn(a).Dead)
}

// localModel is HAProxy as the accumulation sees it, for the property test:
// streams with a server (or none yet) whose totals grow, that end, whose
// addresses are reused, that a dump may leave out (torn, or shown late) for up
// to localRetain dumps, and process restarts.
type localModel struct {
	rng      *rand.Rand
	serial   uint64
	streams  []*modelStream
	ended    []*modelStream
	restarts int
}

type modelStream struct {
	id, serial  uint64
	server      string // "" until chosen
	in, out     uint64 // true totals
	missed      int    // dumps in a row that left it out
	listedIn    uint64 // the in total of the last dump that listed it
	listedOut   uint64
	listedOnce  bool
	opened, age time.Duration
}

var modelServers = []string{"s1", "s2", "s3"}

func (m *localModel) step(now time.Duration) localDump {
	r := m.rng
	if r.IntN(40) == 0 {
		// Restart: every stream ends; numbering starts again.
		m.ended = append(m.ended, m.streams...)
		m.streams, m.serial = nil, uint64(r.IntN(3))
		m.restarts++
	}
	for range r.IntN(4) {
		m.serial++
		// Few addresses: freed ones are reused.
		id := uint64(r.IntN(8))
		used := false
		for _, s := range m.streams {
			used = used || s.id == id
		}
		if used {
			continue
		}
		s := &modelStream{id: id, serial: m.serial, opened: now}
		if r.IntN(3) > 0 {
			s.server = modelServers[r.IntN(len(modelServers))]
		}
		m.streams = append(m.streams, s)
	}
	var d localDump
	live := m.streams[:0]
	for _, s := range m.streams {
		if s.server == "" && r.IntN(2) == 0 {
			s.server = modelServers[r.IntN(len(modelServers))]
		}
		s.in += uint64(r.IntN(3)) * uint64(r.IntN(1000))
		s.out += uint64(r.IntN(2)) * uint64(r.IntN(100))
		if r.IntN(6) == 0 {
			m.ended = append(m.ended, s)
			continue
		}
		live = append(live, s)
	}
	m.streams = live
	m.serial++ // the CLI's own stream
	d.maxSerial = m.serial
	for _, s := range m.streams {
		if s.missed < localRetain && r.IntN(8) == 0 {
			s.missed++
			continue
		}
		s.missed = 0
		s.listedIn, s.listedOut, s.listedOnce = s.in, s.out, s.server != ""
		d.streams = append(d.streams, dumpedStream{key: streamKey{s.id, s.serial}, backend: "be", server: s.server,
			in: s.in, out: s.out, age: now - s.opened})
	}
	d.total = len(d.streams) + 1
	return d
}

// counted is what the accumulation must have counted per server: of every
// stream a dump listed with a server, its totals at the last dump that listed
// it. true is every byte the streams forwarded.
func (m *localModel) counted() (want, true_ map[string]uint64) {
	want, true_ = map[string]uint64{}, map[string]uint64{}
	for _, s := range append(slicesClone(m.streams), m.ended...) {
		if s.listedOnce {
			want[s.server] += s.listedIn
		}
		true_[s.server] += s.in
	}
	return want, true_
}

func slicesClone[T any](s []T) []T { return append([]T(nil), s...) }

// checkLocalAcc runs one random history and checks, at every dump: no counter
// decreases; none exceeds the bytes its server's streams really forwarded (no
// byte counted twice); and without a restart, each counter is exactly the
// sum of the streams' totals as last listed (no listed byte lost). The rates
// and session means are finite and not negative.
func checkLocalAcc(t *testing.T, seed uint64, dumps int) {
	m := &localModel{rng: rand.New(rand.NewPCG(seed, 7))}
	a := newLocalAcc()
	prev := map[string]float64{}
	now := time.Duration(0)
	for i := range dumps {
		now += time.Duration(500+m.rng.IntN(3000)) * time.Millisecond
		d := m.step(now)
		d.at = localT0.Add(now)
		a.apply(d)
		r := a.reading("be", LocalQuery{Counter: CounterBytesIn, Servers: modelServers}, 5)
		want, real := m.counted()
		for name, s := range r.Servers {
			if s.Bytes < prev[name] {
				t.Fatalf("seed %d dump %d: %s went down %v → %v", seed, i, name, prev[name], s.Bytes)
			}
			prev[name] = s.Bytes
			if s.Bytes > float64(real[name]) {
				t.Fatalf("seed %d dump %d: %s counted %v of %d bytes forwarded", seed, i, name, s.Bytes, real[name])
			}
			if m.restarts == 0 && s.Bytes != float64(want[name]) {
				t.Fatalf("seed %d dump %d: %s counted %v, listed %d", seed, i, name, s.Bytes, want[name])
			}
			if !(s.Rate >= 0) || !(s.Sessions >= 0) {
				t.Fatalf("seed %d dump %d: %s: %+v", seed, i, name, s)
			}
		}
	}
}

func TestLocalAccProperties(t *testing.T) {
	for seed := range uint64(300) {
		checkLocalAcc(t, seed, 120)
	}
}

func FuzzLocalAcc(f *testing.F) {
	for _, s := range []uint64{1, 2, 99, 12345} {
		f.Add(s, uint8(60))
	}
	f.Fuzz(func(t *testing.T, seed uint64, dumps uint8) {
		checkLocalAcc(t, seed, int(dumps))
	})
}

func TestLocalQueryValidate(t *testing.T) {
	for _, c := range []string{"", CounterBytesIn, CounterBytesOut, LocalBoth} {
		assert.NoError(t, LocalQuery{Counter: c}.Validate())
	}
	err := LocalQuery{Counter: CounterSessionsTotal}.Validate()
	assert.ErrorContains(t, err, `unknown counter "sessions_total" (want bytes_in, bytes_out or both)`)
	assert.False(t, errors.Is(err, ErrLocalSignalDead))
}

// A read cancelled by its caller (a reload, shutdown) says nothing about
// HAProxy: the next call dumps again rather than get the cancel back for
// LocalBudget.Share, which would make a kept backend weigh by its source
// alone (fast signal dead) for its first cycles after the reload.
func TestReadLocalCancelIsNoFailure(t *testing.T) {
	f := startFake(t, true, nil) // never answers
	c := fakeClient(t, f.path)
	c.SetLocalBudget(LocalBudget{Share: time.Hour})
	b := c.Backend("be")
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	_, err := b.ReadLocal(ctx, LocalQuery{})
	require.ErrorIs(t, err, context.Canceled)
	_, err = b.ReadLocal(context.Background(), LocalQuery{})
	require.Error(t, err)
	assert.NotErrorIs(t, err, context.Canceled, "the second call dumped again (and timed out)")
	var ne net.Error
	assert.True(t, errors.As(err, &ne) && ne.Timeout(), "%v", err)
}
