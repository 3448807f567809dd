package peers

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// A peer's answer, whatever it is, can only add finite, non-negative
// rates, sessions and bytes to the own signal, the byte counter never goes
// back, and the weights made of it stay within 1..256: over random answers
// of three peers (lies within the schema included: values from 0 to 1e308,
// negative, -0, the smallest float, out of float64's range, of the wrong
// type, ages and spans likewise, servers that do not exist, backends of
// another unit, this daemon's own instance, truncated or foreign bodies, a
// failing status), each cycle through the real fetch, the peered reader,
// the calibrating Fresh source and the Controller.
func TestPeerAnswersNeverMakeABadWeight(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var clock atomic.Int64 // ns since the epoch below
	epoch := time.Unix(2_000_000_000, 0)
	now := func() time.Time { return epoch.Add(time.Duration(clock.Load())) }

	set := newSet(prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	set.now = now
	const peers = 3
	var bodies [peers]atomic.Pointer[peerBody]
	urls := make([]string, peers)
	for i := range peers {
		bodies[i].Store(&peerBody{status: http.StatusServiceUnavailable})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			b := bodies[i].Load()
			w.WriteHeader(b.status)
			fmt.Fprint(w, b.text)
		}))
		t.Cleanup(srv.Close)
		urls[i] = srv.URL
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); set.Stop() })
	// An hour's interval: each poller asks once at start, then sleeps; the
	// cycles below ask themselves, with the answer they just set.
	set.Poll(ctx, urls, time.Hour)
	timing := TimingFor(time.Hour)
	timing.Interval = 2 * time.Second // stale as the daemon's 2 s cycle
	for _, u := range urls {
		pr := set.peers[u]
		testenv.WaitFor(t, "the first ask of "+u, func() bool {
			pr.mu.Lock()
			defer pr.mu.Unlock()
			return pr.problem != "not asked yet"
		})
	}
	set.mu.Lock()
	set.timing = timing
	set.mu.Unlock()

	servers := []string{"s1", "s2", "s3"}
	own := &steadyReader{now: now, rate: map[string]float64{"s1": 1000, "s2": 2000, "s3": 0}}
	rec := &lastRead{inner: NewReader(own, "be", set)}
	ext := &fixedExternal{now: now, servers: servers}
	fresh, err := weighter.NewFresh(weighter.FreshConfig{Fast: rec, External: ext, Calibrate: true,
		Calibration: weighter.DefaultCalibration(10 * time.Second), Refresh: 5 * time.Second, Now: now})
	require.NoError(t, err)
	ctrl, err := weighter.NewController(weighter.DefaultPolicy())
	require.NoError(t, err)
	states := make([]weighter.ServerState, len(servers))
	for i, s := range servers {
		states[i] = weighter.ServerState{Name: s, Weight: 100, InitialWeight: 100, Admin: weighter.AdminReady, Operational: "up"}
	}

	bytes := map[string]float64{}
	added := 0 // cycles that added a peer's reading
	for cycle := range 400 {
		for i, u := range urls {
			bodies[i].Store(randomPeerBody(rng, set.instance))
			set.fetch(ctx, set.peers[u], timing)
		}
		clock.Add(int64(time.Second))
		loads, _, err := fresh.FetchSignal(ctx, states)
		require.NoError(t, err, "cycle %d", cycle)
		if !strings.HasPrefix(rec.get().Peers, "peers 0 ") {
			added++
		}
		for _, s := range servers {
			c := rec.get().Servers[s]
			for what, v := range map[string]float64{"rate": c.Rate, "sessions": c.Sessions, "bytes": c.Bytes} {
				require.False(t, math.IsNaN(v) || math.IsInf(v, 0) || v < 0, "cycle %d %s %s %g", cycle, s, what, v)
			}
			require.GreaterOrEqual(t, c.Bytes, bytes[s], "cycle %d %s: the byte counter went back", cycle, s)
			bytes[s] = c.Bytes
		}
		for s, series := range loads {
			for _, p := range series {
				require.False(t, math.IsNaN(p.Value) || math.IsInf(p.Value, 0) || p.Value < 0, "cycle %d %s load %g", cycle, s, p.Value)
			}
		}
		plan := ctrl.Plan(now(), loads, states)
		for _, sp := range plan.Servers {
			require.False(t, math.IsInf(sp.Load, 0), "cycle %d %s load %g", cycle, sp.Server, sp.Load)
			require.True(t, sp.New >= 1 && sp.New <= 256, "cycle %d %s weight %d", cycle, sp.Server, sp.New)
		}
		require.False(t, math.IsNaN(plan.Imbalance) || math.IsInf(plan.Imbalance, 0), "cycle %d imbalance", cycle)
		ctrl.Commit(plan.Changes())
		for _, c := range plan.Changes() {
			for i := range states {
				if states[i].Name == c.Server {
					states[i].Weight = c.Weight
				}
			}
		}
	}
	t.Logf("added in %d cycles", added)
	require.Greater(t, added, 50, "cycles that added a peer (the property holds of them too)")
}

// peerBody is what a fake peer answers.
type peerBody struct {
	status int
	text   string
}

// randomPeerBody is an answer a peer might send: mostly the schema with
// random (often absurd) values, sometimes not an answer at all.
func randomPeerBody(rng *rand.Rand, self string) *peerBody {
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	number := func() string {
		if rng.IntN(4) > 0 { // mostly a plausible value, of any magnitude
			return fmt.Sprintf("%g", rng.Float64()*math.Pow(10, float64(rng.IntN(13))))
		}
		return pick("0", "-0", "1", "0.5", "5e-324", "1e-300", "300", "4e4", "1e9", "1e9", "1000000001",
			"1e12", "1.0000001e12", "1e300", "1.7e308", "1e400", "-1", "-1e300", `"300"`, "null", "true",
			"123456789012345678901234567890")
	}
	switch rng.IntN(10) {
	case 0:
		return &peerBody{status: http.StatusOK, text: pick("", "null", "[]", "{}", "<html>", `{"instance":`,
			strings.Repeat("[", 20000), `{"instance":"x","backends":null}`, `{"instance":"x","backends":{"be":null}}`)}
	case 1:
		return &peerBody{status: pick2(rng, http.StatusInternalServerError, http.StatusNotFound), text: "oops"}
	}
	var b strings.Builder
	fmt.Fprintf(&b, `{"instance":%q,"backends":{`, pick("peer-a", "peer-b", "peer-c", self, ""))
	for i := range 1 + rng.IntN(2) {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `%q:{"age_seconds":%s,"span_seconds":%s,"connections":%s,"servers":{`,
			pick("be", "be", "be", "other"), pick(number(), "0", "0.5", "1"), pick(number(), "1", "2", "2"), pick("false", "false", "true"))
		for j := range rng.IntN(4) {
			if j > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `%q:{"bytes_per_second":%s,"sessions":%s}`, pick("s1", "s2", "s3", "s9", ""), number(), number())
		}
		b.WriteString("}}")
	}
	b.WriteString("}}")
	return &peerBody{status: http.StatusOK, text: b.String()}
}

func pick2(rng *rand.Rand, a, b int) int {
	if rng.IntN(2) == 0 {
		return a
	}
	return b
}

// steadyReader is a LocalReader whose servers move rate B/s over one
// session each, read once a (fake) second.
type steadyReader struct {
	now   func() time.Time
	rate  map[string]float64
	last  time.Time
	bytes map[string]float64
}

func (r *steadyReader) ReadLocal(_ context.Context, servers []weighter.ServerState) (weighter.LocalRead, error) {
	at := r.now()
	if r.bytes == nil {
		r.bytes = map[string]float64{}
	}
	out := weighter.LocalRead{At: at, Since: r.last, Servers: map[string]weighter.LocalCounter{}}
	for _, name := range weighter.Names(servers) {
		if !r.last.IsZero() {
			r.bytes[name] += r.rate[name] * at.Sub(r.last).Seconds()
		}
		out.Servers[name] = weighter.LocalCounter{Bytes: r.bytes[name], Rate: r.rate[name], Sessions: 1, Reset: r.last.IsZero()}
	}
	r.last = at
	return out, nil
}

// lastRead keeps the last read its inner reader returned.
type lastRead struct {
	inner weighter.LocalReader
	mu    sync.Mutex
	last  weighter.LocalRead
}

func (l *lastRead) ReadLocal(ctx context.Context, servers []weighter.ServerState) (weighter.LocalRead, error) {
	r, err := l.inner.ReadLocal(ctx, servers)
	l.mu.Lock()
	l.last = r
	l.mu.Unlock()
	return r, err
}

func (l *lastRead) get() weighter.LocalRead {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last
}

// fixedExternal is a calibrating source whose servers' loads are 10, 20, 30
// at every point.
type fixedExternal struct {
	now     func() time.Time
	servers []string
}

func (e *fixedExternal) Fetch(context.Context, []weighter.ServerState) (weighter.Loads, error) {
	out := weighter.Loads{}
	for i, s := range e.servers {
		out[s] = weighter.Series{{Time: e.now(), Value: float64(10 * (i + 1))}}
	}
	return out, nil
}
