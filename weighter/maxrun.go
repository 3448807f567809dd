package weighter

import (
	"fmt"
	"math"
	"strings"
)

// The run bound (Policy.MaxRun): how many new connections in a row one
// server may take under HAProxy's weighted leastconn before half of the
// backend's servers take one.
//
// Leastconn gives a new connection to the server with the lowest
// (active+1)/weight (src/lb_fwlc.c). With r_i = w_i/(n_i+1), n_i the
// server's open connections (scur), a server i takes arrivals ahead of a
// server j while (n_i+k)/w_i ≤ (n_j+1)/w_j: k_i ≤ w_i/r_j − n_i. Weights are
// written every cycle but placed by for as long as they stand; with
// connections that live for hours arrivals are rare and nothing repairs a
// pile-up: a server whose weight says it is light takes every arrival of a
// burst (three heavy clients connecting together all land on it). The run
// bound caps every weight at
//
//	w_i ≤ (n_i + 1 + H) · r_ref        (H = MaxRun, or more: runAllowance)
//
// r_ref being the lower median server's (runReference): the 5th most
// favoured of 8. Before that server takes one new connection no server takes
// more than 1 + H, and over any burst server i takes
// k_i ≤ 1 + H + (n_i+1+H)/(n_ref+1) · k_ref. A burst spreads over at least
// the favoured half of the backend. The servers below the median (the
// loaded ones the weights keep new connections from) keep their weights:
// a bound against the least favoured server instead would give every other
// server its slot count as weight, leastconn by another name (measured:
// docs/research/production-world.md). H is counted in connections, fresh each cycle.
//
// The bound is one more bound inside the share solver (shareOut), beside
// max_step's: x_i ≤ c_i = (n_i+1+H)·ρ next to b_i/max_step ≤ x_i ≤
// b_i·max_step, the capped servers' share going to the others through k
// (boundRuns). max_step is the guarantee the README states for every cycle,
// so where the two conflict max_step wins:
//
//   - every cycle keeps max_step, the run bound included;
//   - every server whose written weight is above its run bound is one
//     max_step holds there: its share fell by the full max_step this cycle,
//     or writing it lower would take another server's share above its
//     ceiling (share·max_step), each up to the rounding;
//   - so with steady loads and connections a server e times over its bound
//     is within it after about log_max_step(e) cycles, and from then on a
//     burst of any size keeps it exactly.
//
// A server held for missing data keeps its share unless its bound lowers
// it; it is never raised for the bound (its load is unknown). The bound is
// kept on the weights before rounding and on the integers written
// (boundIntegers). Weight 1, HAProxy's smallest, is never lowered further.

// While new connections are rare (RunRare: the EWMA below counts fewer than
// that many gained per server per cycle) the bound tightens: the reference
// is the RunRareSpread-th most favoured server (never past the lower
// median) and H is rareH, under one, so no server takes two new
// connections in a row before the reference takes one and a burst of
// RunRareSpread clients lands on as many servers. Where connections live
// for hours a cycle sees an arrival every few dozen cycles; weights are
// re-planned every cycle, so the favoured server needs one arrival of
// reach, not a run, and a second one in the same burst is the herding
// (docs/research/production-world.md §3 (g)). Only the servers more favoured than
// the reference are capped, so the weights' order among the rest is kept.
// Where connections are many and short (the lab, 0.3-0.8 gained per server
// per cycle against 0.015 for hour-long ones in the simulator) the runs are
// how a light server catches up, and the median bound stays.
//
// While rare, a server's allowance also loses the connections it gained
// since the last cycle: H_i = rareH − gained_i, so its cap stays where it
// was before them. A burst spread over a second can straddle a cycle; the
// cycle in between sees the server's new connection but not yet its load
// (the fast signal shows a new connection's bytes over the next seconds),
// and with the cap counted from the new n it would make the server the
// most favoured again, for the next heavy client of the same burst
// (measured on a real HAProxy: docs/research/bench-balance.md, session 9).

// runState is what the run bound remembers between cycles: each server's
// open connections at the last cycle and the EWMA of the new connections a
// server gains per cycle (RunChurn, RunRare).
type runState struct {
	seen  map[string]int
	churn float64 // per server per cycle; NaN before two cycles
	rare  float64 // the same over ~10 cycles (RunRare); NaN before two cycles
	known int     // cycles the churn has been measured over
	h     float64 // this cycle's H
	rank  int     // this cycle's reference: 0 the lower median, k the k-th most favoured server
	// bounded: the bound was applied the last time weights were shared
	// out (the backend busy: busy); a held cycle keeps it
	bounded bool
	// the share solver's caps and boundIntegers' witness, reused across cycles
	caps, witness []float64
}

// runAlpha is the weight of one cycle in the churn's EWMA: a half-life of
// about 30 cycles (a minute at 2 s), so that a burst barely moves it.
const runAlpha = 0.0228

// rareAlpha is the weight of one cycle in RunRare's EWMA of the same
// gains: a half-life of 10 cycles (20 s at 2 s), so that the bound
// tightens within a minute of a backend's clients settling (a ramp of
// clients reconnecting after a restart ends with ~1 per server per cycle),
// while a burst of 3 on 8 servers adds 0.025.
const rareAlpha = 0.067

// rareWarm is how many cycles the churn is measured over before RunRare
// may tighten the bound: the EWMA starts from its first cycle's gains,
// which say little (a daemon starting beside a busy HAProxy sees none).
const rareWarm = 30

// rareH is H while new connections are rare: any H under one allows one
// new connection in a row before the reference takes one; the nearer one,
// the more room the weights keep among the capped servers (measured: 0.5,
// 0.75 and 0.9 alike within the simulator's seeds).
const rareH = 0.9

// runAllowance sets this cycle's H: MaxRun, or with RunChurn > 0, at least
// RunChurn times the new connections a server gains per cycle on average
// (the EWMA of the mean over the servers of max(0, n_i − n_i before)). A
// server's gains are a lower bound of its arrivals (a departure in the same
// cycle hides one), which the factor absorbs. Where connections are many
// and short a server gains a few every cycle and H grows with them, so the
// weights keep the reach they need; where they are rare and long H stays at
// MaxRun, and a burst cannot follow the weights onto one server.
func (c *Controller) runAllowance(ws []work) {
	st := &c.runs
	st.h, st.rank = c.p.MaxRun, 0
	if c.p.RunChurn <= 0 && c.p.RunRare <= 0 {
		return
	}
	if st.seen == nil {
		st.seen, st.churn, st.rare = map[string]int{}, math.NaN(), math.NaN()
	}
	gained, known := 0, 0
	for i := range ws {
		w := &ws[i]
		if before, ok := st.seen[w.Server]; ok {
			w.gained = max(0, w.sessions-before)
			gained += w.gained
			known++
		}
		st.seen[w.Server] = w.sessions
	}
	if len(st.seen) > 2*len(ws) { // servers come and go: forget the gone
		clear(st.seen)
		for i := range ws {
			st.seen[ws[i].Server] = ws[i].sessions
		}
	}
	if known > 0 {
		st.known++
		x := float64(gained) / float64(known)
		st.churn = ewma(st.churn, x, runAlpha)
		st.rare = ewma(st.rare, x, rareAlpha)
	}
	if !math.IsNaN(st.churn) {
		st.h = max(st.h, c.p.RunChurn*st.churn)
	}
	if c.rareArrivals() {
		st.h, st.rank = rareH, c.p.RunRareSpread
	}
}

// rareArrivals reports whether new connections are rare enough for the
// tightened bound (RunRare): the churn measured over at least rareWarm
// cycles and below RunRare.
func (c *Controller) rareArrivals() bool {
	st := &c.runs
	return c.p.RunRare > 0 && st.known >= rareWarm && st.rare < c.p.RunRare
}

// ewma moves avg towards x by alpha; the first x (avg NaN) starts it.
func ewma(avg, x, alpha float64) float64 {
	if math.IsNaN(avg) {
		return x
	}
	return avg + alpha*(x-avg)
}

// ReasonMaxRun is the note of a weight the run bound lowered.
const ReasonMaxRun = "run bound (max_run)"

// boundRuns puts the run bound into the share solver: x_i is capped at
// c_i = (n_i+1+H)·ρ, ρ being the lower median server's x/(n+1) in the
// solution the caps give. ρ depends on the solution it bounds: capping the
// favoured servers gives their share to the others, which raises it. Capped
// at the uncapped solution's median ρ₀ the median only rises (the servers
// at or above it stay there: the capped ones at (n_i+1+H)·ρ₀, the others
// only gain), so the caps at ρ₀ hold; with no cap binding the median is ρ₀
// again. Between the two, the largest ρ whose solution's median is still at
// least ρ is found by bisection: the loosest caps that hold.
//
// When max_step leaves the capped servers' share nowhere to go (the others
// cannot take it within b_i·max_step), ρ is raised to the least that leaves
// room, ρ_f: every server within its bound is then at its ceiling (its share
// raised by the full max_step) and every capped server is over its bound by
// the same factor, the least max_step allows. Before that, the deadband's
// pins are lifted (it only spares a write) and the search runs again.
// boundIntegers then keeps the bound on the integers written.
func (s *share) boundRuns() {
	s.caps = s.c.runs.caps[:0]
	for range len(s.active) + len(s.held) {
		s.caps = append(s.caps, math.Inf(1))
	}
	s.c.runs.caps = s.caps
	if !s.searchReference() && s.unpin() {
		s.searchReference()
	}
	s.noteRuns()
}

// searchReference sets the caps at the largest ρ that holds (see
// boundRuns), or at ρ_f when max_step leaves no room for one, and shares
// out with them; with no cap needed it leaves none. It reports whether the
// caps hold.
func (s *share) searchReference() bool {
	for i := range s.caps {
		s.caps[i] = math.Inf(1)
	}
	s.solve()
	low, ok := s.runReference()
	if !ok {
		return true
	}
	high := 0.0 // at ρ = high no cap binds, and there is room
	for i := range s.caps {
		high = max(high, s.xOf(i)/s.slotsOf(i))
	}
	if high <= low {
		return true // the uncapped solution keeps the bound
	}
	if s.capAt(low); !s.roomFor(1) {
		low = s.leastRoom(low, high)
		if !s.holdsAt(low) {
			return false
		}
	} else {
		for range 8 { // ρ₀'s caps hold but for a server resumed from a drain, which top moves
			if s.holdsAt(low) {
				break
			}
			low, _ = s.runReference()
		}
	}
	for range 48 {
		mid := math.Sqrt(low * high)
		if !(mid > low && mid < high) || high <= low*(1+1e-6) { // ρ to a millionth: the integers are bounded after
			break
		}
		if s.holdsAt(mid) {
			low = mid
		} else {
			high = mid
		}
	}
	return s.holdsAt(low)
}

// leastRoom is ρ_f, the least ρ in [low, high] whose caps leave the servers
// room to share out what they hold (roomFor), when low's do not; high's do.
func (s *share) leastRoom(low, high float64) float64 {
	for range 48 {
		mid := math.Sqrt(low * high)
		if !(mid > low && mid < high) || high <= low*(1+1e-9) {
			break
		}
		if s.capAt(mid); s.roomFor(1) {
			high = mid
		} else {
			low = mid
		}
	}
	return high
}

// holdsAt caps at rho, shares out, and reports whether the solution's own
// median is at least rho (the caps hold).
func (s *share) holdsAt(rho float64) bool {
	s.capAt(rho)
	s.solve()
	m, ok := s.runReference()
	return ok && m >= rho*(1-1e-12)
}

// capAt sets every server's cap to (n_i+1+H_i)·rho.
func (s *share) capAt(rho float64) {
	for i := range s.caps {
		s.caps[i] = s.slotsOf(i) * rho
	}
}

// slotsOf is n_i+1+H_i of server i, the slots its cap allows: H, less the
// connections it gained since the last cycle while new connections are
// rare (see runState). At least 1+rareH−gained+n ≥ 1.9, as n ≥ gained.
func (s *share) slotsOf(i int) float64 {
	h := s.c.runs.h
	if s.c.runs.rank > 0 {
		h -= float64(s.workOf(i).gained)
	}
	return float64(s.sessionsOf(i)+1) + h
}

// unpin frees every server the deadband pinned and reports whether there
// was any.
func (s *share) unpin() bool {
	some := false
	for i := range s.pinned {
		some = some || s.pinned[i]
		s.pinned[i] = false
	}
	return some
}

// sessionsOf is the open connections of server i, active servers then held.
func (s *share) sessionsOf(i int) int {
	if i < len(s.active) {
		return s.active[i].sessions
	}
	return s.held[i-len(s.active)].sessions
}

// xOf is x of server i, active servers then held ones.
func (s *share) xOf(i int) float64 {
	if i < len(s.active) {
		return s.activeX(i)
	}
	return s.heldX(i - len(s.active))
}

// runReference is ρ, the weight per connection slot x/(n+1) of the lower
// median server of the current solution; false when no server has a weight.
func (s *share) runReference() (float64, bool) {
	rs := s.c.buf.runR[:0]
	for i := range len(s.active) + len(s.held) {
		if x := s.xOf(i); x > 0 {
			rs = append(rs, x/float64(s.sessionsOf(i)+1))
		}
	}
	s.c.buf.runR = rs
	return runReference(rs, s.c.runs.rank)
}

// boundIntegers keeps the bound on the integer weights written, exact
// being every server's weight before rounding (active servers then held
// ones), each replaced by the integer written: rounding can take a weight
// past (n_i+1+H)·r_ref by half a unit, and the reference server's own
// rounding moves r_ref, by more than the bound's slack when H·r_ref is
// under a unit. A weight above its integer limit floor((n_i+1+H)·r_ref) is
// lowered towards it, but only as far as max_step allows: the integers
// written must still stand for exact weights that keep it, every server's
// exact weight before rounding except the lowered ones', which stand at
// n+½, the nearest their integer allows (integerWitness). A weight lowered
// can itself fall below r_ref (when H·r_ref < 1) and move the median, so
// the passes repeat to a fixed point; they only lower weights, integers of
// at least 1, so they end. At the end every weight above its limit is one
// that max_step kept from going lower.
func (s *share) boundIntegers(exact []float64) {
	wit := s.integerWitness(exact)
	for i, x := range exact {
		exact[i] = float64(toWeight(x, MaxWeight))
	}
	for range 1000 {
		if !s.lowerIntegers(exact, &wit) {
			return
		}
	}
}

// integerWitness is exact weights the integers written stand for, each in
// [n-½, n+½] (a 1 for one in (0, 1.5]), and what max_step asks of them over
// the servers with a share before (a base weight b): their sum Y, and b's.
// Each such server j's share y_j/Y stays within [s_j/step, s_j·step],
// s_j = b_j/Σb: true of the solver's weights, kept by every lowering.
type integerWitness struct {
	y            []float64
	sum, baseSum float64
}

func (s *share) integerWitness(exact []float64) integerWitness {
	w := integerWitness{y: append(s.c.runs.witness[:0], exact...)}
	s.c.runs.witness = w.y
	for i, y := range w.y {
		if b := s.baseOf(i); b > 0 {
			w.sum += y
			w.baseSum += b
		}
	}
	return w
}

// stepFloor is the least integer server i (a share before) can be written
// at, its witness at m+½, with its share still at least b_i/Σb / max_step,
// and the sum of the witness at least need, the most any other server's
// share needs to stay under its ceiling (y_j / (s_j·step)).
func (s *share) stepFloor(i int, need float64, wit integerWitness) int {
	q := s.baseOf(i) / wit.baseSum / s.step * (1 + 1e-12)
	rest := wit.sum - wit.y[i] // the others' witness
	m := int(math.Ceil(need*(1+1e-12) - rest - 0.5))
	if q < 1 {
		m = max(m, int(math.Ceil(q*rest/(1-q)-0.5)))
	}
	for m < MaxWeight && (float64(m)+0.5) < q*(rest+float64(m)+0.5) {
		m++
	}
	return m
}

// lowerIntegers is one pass of boundIntegers; it reports whether it lowered
// any weight.
func (s *share) lowerIntegers(ints []float64, wit *integerWitness) bool {
	rs := s.c.buf.runR[:0]
	for i, n := range ints {
		rs = append(rs, n/float64(s.sessionsOf(i)+1))
	}
	s.c.buf.runR = rs
	ref, ok := runReference(rs, s.c.runs.rank)
	if !ok {
		return false
	}
	// The two largest sums the others' ceilings need: the first bounds
	// every server but its own.
	need1, need2, who := 0.0, 0.0, -1
	for j, y := range wit.y {
		if b := s.baseOf(j); b > 0 {
			switch need := y / (b / wit.baseSum * s.step); {
			case need > need1:
				need1, need2, who = need, need1, j
			case need > need2:
				need2 = need
			}
		}
	}
	lowered := false
	for i, n := range ints {
		m := max(1, int(math.Floor(s.slotsOf(i)*ref+1e-9)))
		if n <= float64(m) {
			continue
		}
		if s.baseOf(i) > 0 {
			need := need1
			if who == i {
				need = need2
			}
			m = max(m, s.stepFloor(i, need, *wit))
		}
		if float64(m) >= n {
			continue
		}
		y := min(wit.y[i], float64(m)+0.5)
		if s.baseOf(i) > 0 {
			wit.sum -= wit.y[i] - y
		}
		wit.y[i], ints[i], lowered = y, float64(m), true
		s.c.noteRun(s.workOf(i), "")
	}
	return lowered
}

// noteRuns records on each server its run bound lowered that it did, and
// whether max_step held it above the bound this cycle.
func (s *share) noteRuns() {
	for i := range s.caps {
		c, x, free := s.capOf(i), s.xOf(i), s.uncappedX(i)
		if c >= free*(1-1e-12) {
			continue
		}
		w := s.workOf(i)
		switch {
		case x > s.caps[i]*(1+1e-9):
			s.c.noteRun(w, "; held above it by max_step, reached over the next cycles")
		default:
			s.c.noteRun(w, "")
		}
	}
}

// uncappedX is what x of server i would be without its cap, the rest of
// the solution (k, top) as it is.
func (s *share) uncappedX(i int) float64 {
	if i < len(s.active) {
		return sharedWeight(s.active[i], float64(s.raw[i])*s.k, s.pinned[i], s.step, s.top, math.Inf(1))
	}
	return keptWeight(s.baseOf(i), s.step, math.Inf(1))
}

// workOf is server i, active servers then held ones.
func (s *share) workOf(i int) *work {
	if i < len(s.active) {
		return s.active[i]
	}
	return s.held[i-len(s.active)]
}

// busy reports whether the servers carry at least one open connection each
// on average: below that most arrivals find an idle server, which HAProxy's
// leastconn fills first whatever its weight (key 0), one each in turn, and
// the bound is not applied (an idle backend, a target that reports no
// connections).
func busy(active, held []*work) bool {
	open, n := 0, 0
	for _, ws := range [][]*work{active, held} {
		for _, w := range ws {
			open += w.sessions
			n++
		}
	}
	return n > 0 && open >= n
}

// runReference is r_ref, the weight per connection slot (w/(n+1)) of the
// lower median server in leastconn's order (the (⌊S/2⌋+1)-th most favoured
// of the S servers with a weight: the 5th of 8, the 2nd of 2), or with
// rank k > 0 of the k-th most favoured, never past the lower median; false
// when there is none. rs is reordered. The search for ρ asks for it dozens
// of times a cycle, so it selects (expected linear time) rather than sorts.
func runReference(rs []float64, rank int) (float64, bool) {
	if len(rs) == 0 {
		return 0, false
	}
	k := (len(rs) - 1) / 2
	if rank > 0 {
		k = max(k, len(rs)-rank)
	}
	return nthSmallest(rs, k), true
}

// nthSmallest is the k-th smallest of rs (0-based), which it reorders:
// Hoare's selection with the median of three as pivot.
func nthSmallest(rs []float64, k int) float64 {
	lo, hi := 0, len(rs)-1
	for lo < hi {
		mid := lo + (hi-lo)/2
		pivot := max(min(rs[lo], rs[mid]), min(max(rs[lo], rs[mid]), rs[hi]))
		i, j := lo, hi
		for i <= j {
			for rs[i] < pivot {
				i++
			}
			for rs[j] > pivot {
				j--
			}
			if i <= j {
				rs[i], rs[j] = rs[j], rs[i]
				i, j = i+1, j-1
			}
		}
		switch {
		case k <= j:
			hi = j
		case k >= i:
			lo = i
		default:
			return rs[k]
		}
	}
	return rs[k]
}

// noteRun records on w that the run bound lowered its weight, and after
// what (held above it by max_step).
func (c *Controller) noteRun(w *work, after string) {
	var note string
	if c.runs.rank > 0 {
		note = fmt.Sprintf("%s, new connections rare: one in a row before the %s most favoured server takes one%s",
			ReasonMaxRun, ordinal(c.runs.rank), after)
	} else {
		note = fmt.Sprintf("%s: at most %.3g new connections in a row%s", ReasonMaxRun, 1+c.runs.h, after)
	}
	switch {
	case strings.Contains(w.note, note): // the solver's cap, then the integers' pass
	case w.note != "":
		w.note += "; " + note
	default:
		w.note = note
	}
}

// ordinal spells k as "2nd", "3rd", "4th"….
func ordinal(k int) string {
	suffix := "th"
	switch {
	case k%100 >= 11 && k%100 <= 13:
	case k%10 == 1:
		suffix = "st"
	case k%10 == 2:
		suffix = "nd"
	case k%10 == 3:
		suffix = "rd"
	}
	return fmt.Sprintf("%d%s", k, suffix)
}
