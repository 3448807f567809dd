package weighter

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/duration"
)

func mustShedder(t testing.TB, p ShedPolicy) *Shedder {
	t.Helper()
	s, err := NewShedder(p)
	require.NoError(t, err)
	return s
}

// servers returns servers s1, s2, … with the given loads (factor 1).
func shedServers(loads ...float64) []ShedServer {
	out := make([]ShedServer, len(loads))
	for i, l := range loads {
		out[i] = ShedServer{Name: name(i), Load: l}
	}
	return out
}

func sess(id, server string, rate float64) ShedSession {
	return ShedSession{ID: id, Serial: 1, Server: server, Client: "10.0.0." + strings.TrimPrefix(id, "0x") + ":4000", Age: time.Hour, Rate: rate}
}

func TestShedPolicyValidate(t *testing.T) {
	require.NoError(t, DefaultShed().Validate())
	p := ShedPolicy{Above: 1, For: 0, MaxPerMinute: 0, MaxShare: 0, MinAge: -1, Cooldown: -1, Progress: 1}
	err := p.Validate()
	require.Error(t, err)
	for _, field := range []string{"above", "for", "max_per_minute", "max_share", "min_age", "cooldown", "progress"} {
		assert.Contains(t, err.Error(), "shed."+field)
	}
	p = DefaultShed()
	p.Above = math.NaN()
	assert.Error(t, p.Validate())
	p = DefaultShed()
	p.MaxShare = 1.5
	assert.Error(t, p.Validate())
	_, err = NewShedder(ShedPolicy{})
	assert.Error(t, err)
}

// TestShedChoice: the sessions after whose move (to the least loaded other
// server) the busiest of the hot server, its landing server and the rest is
// lowest, each bringing the hot server at least 0.1 × mean closer to the mean.
func TestShedChoice(t *testing.T) {
	for _, tc := range []struct {
		name   string
		load   float64 // s1's load; s2..s4 carry 1000 each
		factor float64
		rates  []float64 // s1's sessions, ids 0x1, 0x2, …
		budget int       // max_per_minute
		want   []string
	}{
		// mean = (3000+3000)/4 = 1500: excess 1500.
		// 1400 would leave s1 at 1600 and its landing server s2 at 2400;
		// 900 leaves them at 2100 and 1900.
		{name: "the one that leaves the busiest lowest where it lands", load: 3000, rates: []float64{2900, 1400, 900, 100}, budget: 1, want: []string{"0x3"}},
		{name: "not the heaviest when it overshoots further", load: 3000, rates: []float64{2900, 1700}, budget: 1, want: []string{"0x2"}},
		{name: "nothing that moves it away from the mean", load: 3000, rates: []float64{3100}, budget: 1, want: nil},
		{name: "the heaviest when it is a whale", load: 3000, rates: []float64{1500, 200, 100}, budget: 1, want: []string{"0x1"}},
		{name: "a second one while it gains", load: 3000, rates: []float64{900, 600, 100}, budget: 3, want: []string{"0x1", "0x2"}},
		{name: "budget bounds the count", load: 3000, rates: []float64{500, 500, 500}, budget: 2, want: []string{"0x1", "0x2"}},
		{name: "nothing that gains less than a tenth of the mean", load: 3000, rates: []float64{140, 100}, budget: 3, want: nil},
		{name: "the factor converts session rate to load", load: 3000, factor: 2, rates: []float64{1400, 750}, budget: 1, want: []string{"0x2"}},
		{name: "ties: lower id", load: 3000, rates: []float64{1000, 1000}, budget: 1, want: []string{"0x1"}},
		{name: "none that no server could take without going hot", load: 3000, rates: []float64{1850, 1700}, factor: 1.1, budget: 1, want: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := DefaultShed()
			// s1 at 2× the mean; room for a session: 1.9 × 1500 − 1000 = 1850.
			p.Above, p.For, p.MaxPerMinute, p.MaxShare = 1.9, 1, tc.budget, 1
			s := mustShedder(t, p)
			var sessions []ShedSession
			for i, r := range tc.rates {
				sessions = append(sessions, sess(fmt.Sprintf("0x%d", i+1), "s1", r))
			}
			servers := shedServers(tc.load, 1000, 1000, 1000)
			servers[0].Factor = tc.factor
			plan := s.Plan(t0, ShedInput{Servers: servers, Sessions: sessions, Unit: "lines/s"})
			var got []string
			for _, sh := range plan.Sheds {
				got = append(got, sh.Session.ID)
			}
			assert.Equal(t, tc.want, got, plan.Reason)
			if tc.want == nil {
				assert.Contains(t, plan.Reason, "no session to close")
			} else {
				assert.Equal(t, "s1", plan.Server)
			}
		})
	}
}

func TestShedReason(t *testing.T) {
	p := DefaultShed()
	p.For, p.MaxShare = 3, 1
	s := mustShedder(t, p)
	in := ShedInput{
		Servers: shedServers(2100, 900, 1000, 0),
		Sessions: []ShedSession{
			{ID: "0x7f3a10", Serial: 9, Server: "s1", Client: "192.0.2.7:51000", Age: 14*time.Minute + 5*time.Second, Rate: 1000},
			{ID: "0x7f3a20", Serial: 10, Server: "s1", Client: "192.0.2.8:51000", Age: time.Minute, Rate: 100},
		},
		Unit: "lines/s",
	}
	// mean 1000, s1 2.1×: hot for 1, 2 cycles, then shed on the third.
	p1 := s.Plan(t0, in)
	assert.Empty(t, p1.Sheds)
	assert.Equal(t, "s1 2.1× mean for 1 of 3 cycles", p1.Reason)
	s.Plan(t0.Add(2*time.Second), in)
	p3 := s.Plan(t0.Add(4*time.Second), in)
	require.Len(t, p3.Sheds, 1)
	assert.Equal(t, "shed session 0x7f3a10 (client 192.0.2.7:51000, 1,000 lines/s, age 14m) from s1: 2.1× mean for 3 cycles", p3.Sheds[0].Reason)
	assert.Equal(t, "would "+p3.Sheds[0].Reason, p3.Sheds[0].DryRun())
	assert.InDelta(t, 1.1, p3.Sheds[0].After, 1e-9)
	// The streak starts again after a shed.
	p4 := s.Plan(t0.Add(6*time.Second), in)
	assert.Equal(t, "s1 2.1× mean for 1 of 3 cycles", p4.Reason)

	assert.Equal(t, "3,100", RateText(3100))
	assert.Equal(t, "1,234,568", RateText(1234567.8))
	assert.Equal(t, "999", RateText(999.4))
	assert.Equal(t, "2.50", RateText(2.5))
	assert.Equal(t, "2h5m", AgeText(2*time.Hour+5*time.Minute+3*time.Second))
	assert.Equal(t, "59s", AgeText(59*time.Second))
}

func TestShedWaitsWhileWeightsWork(t *testing.T) {
	p := DefaultShed()
	p.For, p.Progress, p.MaxShare = 3, 0.1, 1
	s := mustShedder(t, p)
	sessions := []ShedSession{sess("0x1", "s1", 1000)}
	// mean of (x, 1000, 1000, 1000): s1 at 2.5×, 2.2×, 2.0× mean: excess 1.5 → 1.0, falling.
	for i, r := range []float64{2.5, 2.2, 2.0} {
		load := 3000 * r / (4 - r)
		plan := s.Plan(t0.Add(time.Duration(i)*2*time.Second), ShedInput{Servers: shedServers(load, 1000, 1000, 1000), Sessions: sessions})
		assert.Empty(t, plan.Sheds)
		if i == 2 {
			assert.Contains(t, plan.Reason, "coming down (from 2.5× 2 cycles ago)")
		}
	}
	// Flat: shed.
	load := 3000 * 2.0 / 2.0
	plan := s.Plan(t0.Add(6*time.Second), ShedInput{Servers: shedServers(load, 1000, 1000, 1000), Sessions: sessions})
	assert.Contains(t, plan.Reason, "coming down")
	plan = s.Plan(t0.Add(8*time.Second), ShedInput{Servers: shedServers(load, 1000, 1000, 1000), Sessions: sessions})
	assert.Len(t, plan.Sheds, 1, plan.Reason)
}

func TestShedGuards(t *testing.T) {
	p := DefaultShed()
	p.For, p.MaxShare = 1, 1
	in := ShedInput{Servers: shedServers(3000, 1000, 1000, 1000), Sessions: []ShedSession{sess("0x1", "s1", 1200)}, MaxAge: time.Minute}
	for _, tc := range []struct {
		name, reason string
		edit         func(*ShedInput)
	}{
		{"hold", "hold: only 1 of 4 servers", func(in *ShedInput) { in.Hold, in.HoldReason = true, "only 1 of 4 servers have valid data" }},
		{"stale", "data 2m0s old (max_age 1m0s)", func(in *ShedInput) { in.DataAge = 2 * time.Minute }},
		{"one server", "servers with data: 1,", func(in *ShedInput) { in.Servers = shedServers(3000, math.NaN()) }},
		{"young", "1 younger than min_age", func(in *ShedInput) { in.Sessions[0].Age = time.Second }},
		{"unmeasured", "1 not measured", func(in *ShedInput) { in.Sessions[0].Rate = math.NaN() }},
		{"no client", "1 client in cooldown or unknown", func(in *ShedInput) { in.Sessions[0].Client = "" }},
		{"too heavy", "1 too heavy for any server", func(in *ShedInput) { in.Sessions[0].Rate = 1700 }},
		{"cool", "no server above 1.75× mean", func(in *ShedInput) { in.Servers = shedServers(1000, 1000, 1000, 1000) }},
		{"share", "1 sessions × max_share 0.5 < 1", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := p
			if tc.edit == nil {
				q.MaxShare = 0.5
			}
			s := mustShedder(t, q)
			c := in
			c.Sessions = slices.Clone(in.Sessions)
			if tc.edit != nil {
				tc.edit(&c)
			}
			plan := s.Plan(t0, c)
			assert.Empty(t, plan.Sheds)
			assert.Contains(t, plan.Reason, tc.reason)
		})
	}
}

func TestShedCooldownAndRate(t *testing.T) {
	p := DefaultShed()
	p.For, p.MaxShare, p.MaxPerMinute, p.Cooldown, p.Progress = 1, 1, 1, duration.Duration(10*time.Minute), 0
	s := mustShedder(t, p)
	in := ShedInput{Servers: shedServers(3000, 1000, 1000, 1000), Sessions: []ShedSession{
		{ID: "0x1", Server: "s1", Client: "2001:db8::1:4000", Age: time.Hour, Rate: 1000},
		{ID: "0x2", Server: "s1", Client: "2001:db8::1:4001", Age: time.Hour, Rate: 900},
		{ID: "0x3", Server: "s1", Client: "2001:db8::2:4000", Age: time.Hour, Rate: 800},
	}}
	plan := s.Plan(t0, in)
	require.Len(t, plan.Sheds, 1)
	assert.Equal(t, "0x1", plan.Sheds[0].Session.ID)
	s.Commit(t0, []ShedSession{plan.Sheds[0].Session})
	plan = s.Plan(t0.Add(30*time.Second), in)
	assert.Contains(t, plan.Reason, "1 sessions closed in the last minute (max_per_minute 1)")
	// A minute later: the same address (other port) is cooling, the other is not.
	plan = s.Plan(t0.Add(time.Minute), in)
	require.Len(t, plan.Sheds, 1)
	assert.Equal(t, "0x3", plan.Sheds[0].Session.ID)
	s.Commit(t0.Add(time.Minute), []ShedSession{plan.Sheds[0].Session})
	plan = s.Plan(t0.Add(2*time.Minute), in)
	assert.Contains(t, plan.Reason, "3 client in cooldown")
	// After the cooldown the first address may be closed again.
	plan = s.Plan(t0.Add(10*time.Minute), in)
	require.Len(t, plan.Sheds, 1)
	assert.Equal(t, "0x1", plan.Sheds[0].Session.ID)
}

// randomShedInput is a random cycle: loads sometimes invalid, sessions with
// random rates (sometimes NaN, negative, huge), ages and a few client addresses.
func randomShedInput(rng *rand.Rand, servers int) ShedInput {
	var in ShedInput
	for i := range servers {
		load := rng.ExpFloat64() * 1000
		switch rng.IntN(12) {
		case 0:
			load = math.NaN()
		case 1:
			load = -1
		case 2:
			load = math.Inf(1)
		case 3:
			load *= 5
		}
		in.Servers = append(in.Servers, ShedServer{Name: fmt.Sprintf("s%d", i), Load: load, Factor: []float64{0, 1, 0.5, 2, math.NaN()}[rng.IntN(5)]})
	}
	n := rng.IntN(80)
	for j := range n {
		rate := rng.ExpFloat64() * 300
		switch rng.IntN(15) {
		case 0:
			rate = math.NaN()
		case 1:
			rate = -5
		case 2:
			rate = math.Inf(1)
		case 3:
			rate *= 20
		}
		client := fmt.Sprintf("10.0.%d.%d:%d", rng.IntN(2), rng.IntN(6), 1024+rng.IntN(5))
		if rng.IntN(20) == 0 {
			client = ""
		}
		in.Sessions = append(in.Sessions, ShedSession{
			ID: fmt.Sprintf("0x%x", j+1), Serial: uint64(j + 1), Server: fmt.Sprintf("s%d", rng.IntN(servers+1)),
			Client: client, Age: time.Duration(rng.IntN(300)) * time.Second, Rate: rate,
		})
	}
	in.Hold = rng.IntN(10) == 0
	in.MaxAge = time.Minute
	in.DataAge = time.Duration(rng.IntN(70)) * time.Second
	return in
}

// TestShedProperties runs random policies over random cycles and checks every
// rule on every plan: caps, ages, cooldowns, one server, hold and stale data,
// no NaN, determinism.
func TestShedProperties(t *testing.T) {
	for seed := range uint64(120) {
		rng := rand.New(rand.NewPCG(seed, 0x5ed))
		p := ShedPolicy{
			Above: 1 + rng.Float64()*1.5, For: 1 + rng.IntN(4), MaxPerMinute: 1 + rng.IntN(4),
			MaxShare: []float64{0.01, 0.02, 0.1, 1}[rng.IntN(4)], MinAge: duration.Duration(time.Duration(rng.IntN(120)) * time.Second),
			Cooldown: duration.Duration(time.Duration(rng.IntN(600)) * time.Second), Progress: rng.Float64() * 0.5,
		}
		s, twin := mustShedder(t, p), mustShedder(t, p)
		servers := 2 + rng.IntN(6)
		now := t0
		var sheds []time.Time
		lastShed := map[string]time.Time{}
		streak := map[string]int{}
		for cycle := range 150 {
			now = now.Add(time.Duration(1+rng.IntN(4000)) * time.Millisecond)
			in := randomShedInput(rng, servers)
			plan := s.Plan(now, in)
			// Determinism: the same input in another order gives the same plan.
			shuffled := in
			shuffled.Sessions = slices.Clone(in.Sessions)
			rng.Shuffle(len(shuffled.Sessions), func(i, j int) {
				shuffled.Sessions[i], shuffled.Sessions[j] = shuffled.Sessions[j], shuffled.Sessions[i]
			})
			assert.Equal(t, plan, twin.Plan(now, shuffled), "seed %d cycle %d", seed, cycle)

			where := fmt.Sprintf("seed %d cycle %d policy %+v", seed, cycle, p)
			assert.False(t, math.IsNaN(plan.Mean) || math.IsInf(plan.Mean, 0), where)
			mean, lowest, valid := shedMean(in.Servers)
			for _, sv := range in.Servers {
				if in.Hold || (in.DataAge > in.MaxAge) || valid < 2 || !(mean > 0) || !validLoad(sv.Load) || !(sv.Load/mean > p.Above) {
					streak[sv.Name] = 0
				} else {
					streak[sv.Name]++
				}
			}
			if len(plan.Sheds) == 0 {
				assert.Empty(t, plan.Server, where)
				assert.NotEmpty(t, plan.Reason, where)
				continue
			}
			assert.False(t, in.Hold, "shed under hold: "+where)
			assert.LessOrEqual(t, in.DataAge, in.MaxAge, "shed on stale data: "+where)
			assert.LessOrEqual(t, float64(len(plan.Sheds)), p.MaxShare*float64(len(in.Sessions))*(1+1e-9), "share cap: "+where)
			assert.GreaterOrEqual(t, streak[plan.Server], p.For, "hot for fewer cycles than for: "+where)
			streak[plan.Server] = 0
			var load float64
			for _, sv := range in.Servers {
				if sv.Name == plan.Server {
					load = sv.Load
					break
				}
			}
			assert.Greater(t, load/mean, p.Above, where)
			addrs := map[string]bool{}
			factor := 1.0
			for _, sv := range in.Servers {
				if sv.Name == plan.Server {
					if sv.Factor > 0 {
						factor = sv.Factor
					}
					break
				}
			}
			for _, sh := range plan.Sheds {
				c := sh.Session
				assert.Less(t, lowest+factor*c.Rate, p.Above*mean, "a session the least loaded server cannot take: "+where)
				assert.Equal(t, plan.Server, c.Server, "one server per cycle: "+where)
				assert.GreaterOrEqual(t, c.Age, time.Duration(p.MinAge), "min_age: "+where)
				assert.True(t, c.Rate > 0 && !math.IsInf(c.Rate, 0), where)
				addr, ok := clientAddr(c.Client)
				require.True(t, ok, where)
				assert.False(t, addrs[addr], "same client twice in a cycle: "+where)
				addrs[addr] = true
				if last, seen := lastShed[addr]; seen {
					assert.GreaterOrEqual(t, now.Sub(last), time.Duration(p.Cooldown), "cooldown: "+where)
				}
				for _, x := range []float64{sh.Ratio, sh.After} {
					assert.False(t, math.IsNaN(x) || math.IsInf(x, 0), where)
				}
				assert.Less(t, math.Abs(sh.After-1), math.Abs(sh.Ratio-1), "a shed brings the server closer to the mean: "+where)
				assert.NotContains(t, sh.Reason, "NaN", where)
			}
			// Where they land: each on the least loaded other server,
			// counting the ones before it; none goes hot there.
			var land, landFactor []float64
			seen := map[string]bool{plan.Server: true}
			for _, sv := range in.Servers {
				if seen[sv.Name] {
					continue
				}
				seen[sv.Name] = true
				if validLoad(sv.Load) {
					f := sv.Factor
					if !(f > 0) || math.IsInf(f, 0) {
						f = 1
					}
					land, landFactor = append(land, sv.Load), append(landFactor, f)
				}
			}
			require.NotEmpty(t, land, where)
			for _, sh := range plan.Sheds {
				to := 0
				for i := range land {
					if land[i] < land[to] {
						to = i
					}
				}
				land[to] += landFactor[to] * sh.Session.Rate
				assert.Less(t, land[to], p.Above*mean, "a session its landing server cannot take: "+where)
			}
			// Commit all, or sometimes only some (a close failed).
			closed := make([]ShedSession, 0, len(plan.Sheds))
			for _, sh := range plan.Sheds {
				if rng.IntN(5) > 0 {
					closed = append(closed, sh.Session)
				}
			}
			s.Commit(now, closed)
			twin.Commit(now, closed)
			for _, c := range closed {
				addr, _ := clientAddr(c.Client)
				lastShed[addr] = now
				sheds = append(sheds, now)
			}
			// Rate cap: no 60 s span holds more than max_per_minute sheds.
			n := 0
			for _, at := range sheds {
				if now.Sub(at) < time.Minute {
					n++
				}
			}
			assert.LessOrEqual(t, n, p.MaxPerMinute, "rate cap: "+where)
		}
	}
}

func TestShedClientAddr(t *testing.T) {
	for in, want := range map[string]string{
		"192.0.2.1:443": "192.0.2.1", "2001:db8::1:443": "2001:db8::1", "unix:3": "unix", "host": "host", "a:b": "a:b",
	} {
		got, ok := clientAddr(in)
		assert.True(t, ok, in)
		assert.Equal(t, want, got, in)
	}
	_, ok := clientAddr("")
	assert.False(t, ok)
}
