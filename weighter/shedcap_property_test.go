package weighter

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/duration"
)

// randomCloser closes, fails to close (outcome unknown) or finds gone each
// session at random, and records every try.
type randomCloser struct {
	fakeTarget
	rng   *rand.Rand
	tries []ShedResult
}

func (r *randomCloser) CloseSession(_ context.Context, s ShedSession) error {
	res := ShedResult{Shed: Shed{Session: s}, Outcome: ShedClosed}
	switch r.rng.IntN(5) {
	case 0:
		res.Outcome, res.Err = ShedFailed, errors.New("socket timeout")
	case 1:
		res.Outcome, res.Err = ShedGone, fmt.Errorf("%w: ended", ErrSessionGone)
	}
	r.tries = append(r.tries, res)
	return res.Err
}

// The README's caps hold over the daemon's life, not just over one
// Shedder: whatever the loads, the close outcomes, the dry runs and the
// reloads (which keep the Shedder, or build one under a changed policy that
// inherits it), no 60 s hold more than max_per_minute sessions closed, or
// tried (a failed close may have happened), or named by a dry run; and no
// client closed is tried again within cooldown.
func TestShedCapsHoldAcrossReloadsAndFailures(t *testing.T) {
	for seed := range uint64(60) {
		rng := rand.New(rand.NewPCG(seed, 0xcab))
		perMinute, cooldown := 1+rng.IntN(4), time.Duration(rng.IntN(600))*time.Second
		policy := func() ShedPolicy {
			return ShedPolicy{Above: 1.1 + rng.Float64(), For: 1 + rng.IntN(3), MaxPerMinute: perMinute,
				MaxShare: []float64{0.02, 0.1, 1}[rng.IntN(3)], MinAge: duration.Duration(time.Duration(rng.IntN(60)) * time.Second),
				Cooldown: duration.Duration(cooldown), Progress: rng.Float64() * 0.3}
		}
		servers := 3 + rng.IntN(4)
		weights, loads := map[string]int{}, map[string]float64{}
		for i := range servers {
			weights[fmt.Sprintf("s%d", i)], loads[fmt.Sprintf("s%d", i)] = 100, 100
		}
		ctl, err := NewController(testPolicy())
		require.NoError(t, err)
		sh, err := NewShedder(policy())
		require.NoError(t, err)
		src := &shedSource{pipeline: PipelineFast}
		src.loads = loads
		tgt := &randomCloser{fakeTarget: fakeTarget{weights: weights}, rng: rng}
		b := &Weigher{Name: "be", Source: src, Target: tgt, Controller: ctl, Shedder: sh}

		now := t0
		var tried []time.Time              // closes tried and dry-run sheds
		closedAt := map[string]time.Time{} // client IP → its last close
		for cycle := range 300 {
			now = now.Add(time.Duration(1+rng.IntN(4000)) * time.Millisecond)
			where := fmt.Sprintf("seed %d cycle %d", seed, cycle)
			if rng.IntN(15) == 0 { // a reload
				next := sh
				if rng.IntN(3) > 0 {
					next, err = NewShedder(policy())
					require.NoError(t, err)
					next.Inherit(sh)
				}
				sh = next
				b = &Weigher{Name: "be", Source: src, Target: tgt, Controller: ctl, Shedder: sh}
			}
			in := randomShedInput(rng, servers)
			src.rates, src.sessions = map[string]float64{}, in.Sessions
			for _, sv := range in.Servers {
				src.rates[sv.Name] = sv.Load
			}
			if rng.IntN(4) > 0 {
				src.at = now // else the same dump as before
			}
			apply := rng.IntN(6) > 0
			before := len(tgt.tries)
			c := RunCycle(context.Background(), b, now, apply)
			if !apply && c.Plan.Shed != nil {
				for _, s := range c.Plan.Shed.Sheds {
					tried = append(tried, now)
					if addr, ok := clientAddr(s.Session.Client); ok {
						closedAt[addr] = now
					}
				}
			}
			for _, r := range tgt.tries[before:] {
				addr, ok := clientAddr(r.Session.Client)
				require.True(t, ok, where)
				if last, seen := closedAt[addr]; seen {
					assert.GreaterOrEqual(t, now.Sub(last), cooldown, "a client tried again within cooldown: "+where)
				}
				if r.Outcome != ShedGone {
					tried = append(tried, now)
				}
				if r.Outcome == ShedClosed {
					closedAt[addr] = now
				}
			}
			n := 0
			for _, at := range tried {
				if now.Sub(at) < time.Minute {
					n++
				}
			}
			require.LessOrEqual(t, n, perMinute, "max_per_minute: "+where)
		}
	}
}
