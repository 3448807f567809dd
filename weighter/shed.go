package weighter

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/internal/duration"
	"github.com/haproxy-weighter/haproxy-weighter/internal/field"
)

// ShedPolicy bounds session shedding on one backend: closing the heaviest
// long-lived session(s) of a server that stays hot, so that the client
// reconnects and HAProxy places it again by the current weights. Weights
// only steer new connections; a few heavy long-lived sessions on one server
// are beyond their reach. Shedding is off unless a backend configures it
// (docs/shedding.md has the rules, the simulator's figures and the costs).
type ShedPolicy struct {
	// Above (> 1): a server is hot while its load is above Above × the
	// backend's mean load.
	Above float64 `yaml:"above" json:"above"`
	// For (>= 1) is how many consecutive cycles a server must be hot.
	For int `yaml:"for" json:"for"`
	// MaxPerMinute (>= 1) is the most sessions closed on the backend within
	// any 60 s.
	MaxPerMinute int `yaml:"max_per_minute" json:"max_per_minute"`
	// MaxShare (0 < s <= 1) is the largest share of the backend's sessions
	// closed in one cycle: at most floor(MaxShare × sessions).
	MaxShare float64 `yaml:"max_share" json:"max_share"`
	// MinAge: a session younger than this is never closed.
	MinAge duration.Duration `yaml:"min_age" json:"min_age"`
	// Cooldown: a session from a client address (IP, any port) closed less
	// than this long ago is never closed again, so that a client that always
	// sends a heavy stream is not bounced from server to server.
	Cooldown duration.Duration `yaml:"cooldown" json:"cooldown"`
	// Progress (0 <= p < 1): the weights count as bringing a hot server down,
	// and nothing is closed, while its excess over the mean (load/mean − 1)
	// shrank by more than this share over its last For cycles (0: while it
	// shrank at all).
	Progress float64 `yaml:"progress" json:"progress"`
}

// DefaultShed returns the recommended shedding factors (docs/shedding.md,
// chosen in the simulator: the fewest sheds of the factors that bring every
// whale's server under 1.5 × the mean fastest). Shedding itself stays off
// unless configured.
func DefaultShed() ShedPolicy {
	return ShedPolicy{
		Above:        1.75,
		For:          2,
		MaxPerMinute: 4,
		MaxShare:     0.02,
		MinAge:       duration.Duration(10 * time.Second),
		Cooldown:     duration.Duration(10 * time.Minute),
		Progress:     0,
	}
}

// Validate reports every invalid field, each message naming the field.
func (p ShedPolicy) Validate() error {
	var errs []error
	add := func(key, format string, args ...any) { errs = append(errs, field.Errorf(key, format, args...)) }
	if !(p.Above > 1) || isInf(p.Above) {
		add("above", "shed.above must be > 1, got %v", p.Above)
	}
	if p.For < 1 {
		add("for", "shed.for must be >= 1 cycle, got %d", p.For)
	}
	if p.MaxPerMinute < 1 {
		add("max_per_minute", "shed.max_per_minute must be >= 1, got %d", p.MaxPerMinute)
	}
	if !(p.MaxShare > 0 && p.MaxShare <= 1) {
		add("max_share", "shed.max_share must be in (0, 1], got %v", p.MaxShare)
	}
	if p.MinAge < 0 {
		add("min_age", "shed.min_age must be >= 0, got %v", p.MinAge)
	}
	if p.Cooldown < 0 {
		add("cooldown", "shed.cooldown must be >= 0, got %v", p.Cooldown)
	}
	if !(p.Progress >= 0 && p.Progress < 1) {
		add("progress", "shed.progress must be in [0, 1), got %v", p.Progress)
	}
	return errors.Join(errs...)
}

// ShedSession is one open session of the backend as the shed planner needs it
// (from HAProxy's `show sess all`: the caller matches two reads by ID and
// Serial and measures the rate).
type ShedSession struct {
	ID     string // HAProxy's stream id (0x…), what closes it
	Serial uint64 // HAProxy's stream number, with ID naming one stream for good
	Server string
	// Client is the source address "ip:port" as HAProxy prints it (an IPv6
	// address without brackets). The cooldown is per IP; a session without
	// a client address is never closed (its cooldown could not be kept).
	Client string
	Age    time.Duration
	// Rate is the session's measured rate: the change of its byte totals
	// between two reads over the time between them, in the unit of
	// ShedInput.Unit. NaN (or <= 0): not measured, never closed.
	Rate float64
}

// ShedServer is one server's load this cycle.
type ShedServer struct {
	Name string
	Load float64 // the server's whole load; NaN or negative = no data
	// Factor is the load one unit of session rate adds to Load (the
	// calibration factor when loads are calibrated; 0 or invalid = 1).
	Factor float64
}

// factor is the server's Factor, 1 when it is 0 or invalid.
func (sv ShedServer) factor() float64 {
	if !(sv.Factor > 0) || isInf(sv.Factor) {
		return 1
	}
	return sv.Factor
}

// ShedInput is what the shed planner sees in one cycle of one backend.
type ShedInput struct {
	Servers  []ShedServer
	Sessions []ShedSession
	// Hold: the coverage guard holds the backend (Plan.Hold); HoldReason says why.
	Hold       bool
	HoldReason string
	// DataAge is the age of the data the loads and rates come from; with
	// MaxAge > 0 (Policy.MaxAge), older data sheds nothing.
	DataAge, MaxAge time.Duration
	// Unit names the rates in reasons ("bytes/s"); "" = "/s".
	Unit string
	// Pins, for a backend that pins its heavy clients, are the pins in
	// force once this cycle's batch is written: client IP → server (nil
	// when the backend does not pin). A close of a session whose client is
	// pinned elsewhere is a move to a chosen server, not a lottery: the
	// guards that keep a shed from moving the problem (max_share, the
	// room on the least loaded server) give way to one check, that the
	// move lowers the busier of the two servers. The per-address
	// cooldown still holds: one move per client per cooldown.
	Pins map[string]string
}

// Shed is one session to close.
type Shed struct {
	Session ShedSession `json:"session"`
	Ratio   float64     `json:"ratio"`  // the server's load / mean before
	After   float64     `json:"after"`  // … and after the planned sheds, as predicted
	Cycles  int         `json:"cycles"` // cycles the server was hot
	Reason  string      `json:"reason"`
	// To is the server the client's pin sends it to ("" when not pinned:
	// it lands by the weights).
	To string `json:"to,omitempty"`
}

// DryRun is the shed's reason as a dry run reports it.
func (s Shed) DryRun() string { return "would " + s.Reason }

// ShedPlan is the outcome of one cycle: the sessions to close (all on
// Server), or why none.
type ShedPlan struct {
	Time   time.Time `json:"time"`
	Server string    `json:"server,omitempty"`
	Sheds  []Shed    `json:"sheds,omitempty"`
	Reason string    `json:"reason,omitempty"` // why nothing is closed
	Mean   float64   `json:"mean"`             // mean load of the servers with data; 0 when undefined
}

// shedStreak is a hot server's consecutive hot cycles and its recent ratios.
type shedStreak struct {
	cycles int
	ratios []float64 // the last For ratios, oldest first
}

// Shedder plans session shedding for one backend. It keeps which servers are
// hot and for how long (updated by Plan, called once per cycle) and what was
// closed (Commit): the sheds of the last minute and each client address's
// last shed. Its methods are safe for concurrent use.
type Shedder struct {
	p ShedPolicy

	mu      sync.Mutex
	streaks map[string]*shedStreak
	recent  []time.Time          // commits of the last minute
	clients map[string]time.Time // client address → its last shed
	read    time.Time            // the fast read last planned from (zero: none)
}

// NewShedder validates p and returns a Shedder with empty state.
func NewShedder(p ShedPolicy) (*Shedder, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("invalid shed policy: %w", err)
	}
	return &Shedder{p: p, streaks: map[string]*shedStreak{}, clients: map[string]time.Time{}}, nil
}

// Policy returns the policy the Shedder was built with.
func (s *Shedder) Policy() ShedPolicy { return s.p }

// shedMinGain is the least a shed must bring its server closer to the mean,
// as a share of the mean: a reconnect is not worth less.
const shedMinGain = 0.1

// Commit records the sessions really closed at now (a subset of a plan's
// sheds): they count against max_per_minute and start their client's cooldown.
func (s *Shedder) Commit(now time.Time, closed []ShedSession) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range closed {
		s.recent = append(s.recent, now)
		if addr, ok := clientAddr(c.Client); ok {
			if last, seen := s.clients[addr]; !seen || now.After(last) {
				s.clients[addr] = now
			}
		}
	}
}

// Plan decides this cycle's sheds. It updates which servers are hot and for
// how long; call it once per cycle, then Commit what was closed.
func (s *Shedder) Plan(now time.Time, in ShedInput) ShedPlan {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forget(now)
	plan := ShedPlan{Time: now}
	switch {
	case in.Hold:
		clear(s.streaks)
		plan.Reason = "hold: " + in.HoldReason
		if in.HoldReason == "" {
			plan.Reason = "hold"
		}
		return plan
	case in.MaxAge > 0 && in.DataAge > in.MaxAge:
		clear(s.streaks)
		plan.Reason = fmt.Sprintf("data %s old (max_age %s)", in.DataAge, in.MaxAge)
		return plan
	}
	mean, lowest, valid := shedMean(in.Servers)
	if valid < 2 || !(mean > 0) {
		clear(s.streaks)
		plan.Reason = fmt.Sprintf("servers with data: %d, mean load %s (needs 2 and a positive mean)", valid, LoadText(mean))
		return plan
	}
	plan.Mean = mean
	hot := s.track(in.Servers, mean)
	if len(hot) == 0 {
		plan.Reason = fmt.Sprintf("no server above %s× mean", strconv.FormatFloat(s.p.Above, 'f', -1, 64))
		return plan
	}
	var why []string
	var ready []hotServer
	for _, h := range hot {
		switch st := s.streaks[h.name]; {
		case st.cycles < s.p.For:
			why = append(why, fmt.Sprintf("%s %s× mean for %d of %d cycles", h.name, ratioText(h.ratio), st.cycles, s.p.For))
		case s.falling(st):
			why = append(why, fmt.Sprintf("%s %s× mean, coming down (from %s× %d cycles ago)", h.name, ratioText(h.ratio), ratioText(st.ratios[0]), len(st.ratios)-1))
		default:
			ready = append(ready, h)
		}
	}
	if len(ready) == 0 {
		plan.Reason = strings.Join(why, "; ")
		return plan
	}
	budget, pinnedOnly := s.p.MaxPerMinute-len(s.recent), false
	if budget <= 0 {
		plan.Reason = fmt.Sprintf("%d sessions closed in the last minute (max_per_minute %d)", len(s.recent), s.p.MaxPerMinute)
		return plan
	}
	if share := int(math.Floor(s.p.MaxShare * float64(len(in.Sessions)) * (1 + 1e-12))); share < budget {
		budget = share
		if budget <= 0 && in.Pins != nil {
			// A backend of a handful of connections (carbon relays):
			// with the landing chosen by a pin, one close is one move,
			// which max_share does not refuse.
			budget, pinnedOnly = 1, true
		}
		if budget <= 0 {
			plan.Reason = fmt.Sprintf("%d sessions × max_share %g < 1", len(in.Sessions), s.p.MaxShare)
			return plan
		}
	}
	for _, h := range ready {
		picked, note := s.choose(now, h, mean, s.p.Above*mean-lowest, landings(in.Servers, h.name), in.Sessions, budget, in.Pins, pinnedOnly)
		if len(picked) == 0 {
			why = append(why, h.name+": "+note)
			continue
		}
		st := s.streaks[h.name]
		after := h.load
		for _, c := range picked {
			after -= h.factor * c.Rate
		}
		plan.Server = h.name
		for _, c := range picked {
			sh := Shed{
				Session: c, Ratio: h.ratio, After: after / mean, Cycles: st.cycles,
				Reason: fmt.Sprintf("shed session %s (client %s, %s %s, age %s) from %s: %s× mean for %d cycles",
					c.ID, c.Client, RateText(c.Rate), unitText(in.Unit), AgeText(c.Age), h.name, ratioText(h.ratio), st.cycles),
			}
			if to := pinnedElsewhere(in.Pins, c, h.name); to != "" {
				sh.To = to
				sh.Reason += "; pinned to " + to
			}
			plan.Sheds = append(plan.Sheds, sh)
		}
		delete(s.streaks, h.name) // it must stay hot For more cycles before the next
		return plan
	}
	plan.Reason = strings.Join(why, "; ")
	return plan
}

// Hot returns each server hot at the last Plan with its consecutive hot
// cycles: a server at For-1 may be shed from at the next Plan. A reader
// that must ask HAProxy for a session's identity before it can be closed
// (the socket table's connections have no stream id) asks only for these.
func (s *Shedder) Hot() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.streaks))
	for name, st := range s.streaks {
		out[name] = st.cycles
	}
	return out
}

// forget drops the commits older than a minute and the cooldowns that ended.
func (s *Shedder) forget(now time.Time) {
	keep := s.recent[:0]
	for _, t := range s.recent {
		if now.Sub(t) < time.Minute {
			keep = append(keep, t)
		}
	}
	s.recent = keep
	for addr, t := range s.clients {
		if now.Sub(t) >= time.Duration(s.p.Cooldown) {
			delete(s.clients, addr)
		}
	}
}

// hotServer is a server above the threshold this cycle.
type hotServer struct {
	name         string
	load, factor float64
	ratio        float64
}

// track updates every server's streak and returns the hot servers, hottest
// first (ties by name).
func (s *Shedder) track(servers []ShedServer, mean float64) []hotServer {
	var hot []hotServer
	seen := map[string]bool{}
	for _, sv := range servers {
		if seen[sv.Name] {
			continue
		}
		seen[sv.Name] = true
		r := sv.Load / mean
		if !validLoad(sv.Load) || !(r > s.p.Above) {
			delete(s.streaks, sv.Name)
			continue
		}
		st := s.streaks[sv.Name]
		if st == nil {
			st = &shedStreak{}
			s.streaks[sv.Name] = st
		}
		st.cycles++
		st.ratios = append(st.ratios, r)
		if len(st.ratios) > s.p.For {
			st.ratios = slices.Delete(st.ratios, 0, len(st.ratios)-s.p.For)
		}
		hot = append(hot, hotServer{name: sv.Name, load: sv.Load, factor: sv.factor(), ratio: r})
	}
	for name := range s.streaks {
		if !seen[name] {
			delete(s.streaks, name)
		}
	}
	slices.SortFunc(hot, func(a, b hotServer) int {
		if c := cmp.Compare(b.ratio, a.ratio); c != 0 {
			return c
		}
		return strings.Compare(a.name, b.name)
	})
	return hot
}

// falling reports whether the server's excess over the mean shrank by more
// than Progress over its last For cycles: the weights are working.
func (s *Shedder) falling(st *shedStreak) bool {
	if len(st.ratios) < 2 {
		return false
	}
	first, last := st.ratios[0]-1, st.ratios[len(st.ratios)-1]-1
	return last < (1-s.p.Progress)*first
}

// choose picks, from the server's eligible sessions, the ones whose move
// brings the backend's busiest load closest to the mean, given where each
// lands: a shed client reconnects by the weights, which favour the least
// loaded server, so each session is assumed to land on the least loaded of
// the other servers (counting the sessions picked before it). Greedily, each
// time the session after whose move the highest of the hot server, its
// landing server and the rest is lowest (ties: the hot server closest to the
// mean, then the heavier), while one brings the hot server at least
// shedMinGain × mean closer to the mean, up to budget sessions, at most one
// per client address. So the heaviest session is not taken when its landing
// server would end up busier than a lighter one leaves both. A session is
// eligible when it is measured, old enough, its client is not cooling down,
// and it is lighter than room (above × mean − the least loaded server's
// load): a session no server can take without going hot would only move the
// problem; nor is one taken that its predicted landing server could not take
// without going above above × mean.
//
// A session whose client is pinned to another server (pins) lands there:
// room does not apply to it (the landing is chosen, so the client is not
// bounced by lottery), and it is taken when its move lowers the busier of
// the hot server and its pin's server. The cooldown does apply: one move
// puts a pinned client where it should be. A session
// whose client is pinned to the hot server itself would come back to it:
// never taken. pinnedOnly: max_share allows no close but a move to a pin.
func (s *Shedder) choose(now time.Time, h hotServer, mean, room float64, land []landing, sessions []ShedSession, budget int, pins map[string]string, pinnedOnly bool) ([]ShedSession, string) {
	var cands []ShedSession
	young, cooling, unmeasured, heavy, total, pinnedHere, share := 0, 0, 0, 0, 0, 0, 0
	ids := map[string]bool{}
	for _, c := range sessions {
		if c.Server != h.name || ids[c.ID] {
			continue
		}
		ids[c.ID] = true
		total++
		addr, ok := clientAddr(c.Client)
		pinned := pinnedElsewhere(pins, c, h.name) != ""
		switch {
		case !(c.Rate > 0) || isInf(c.Rate):
			unmeasured++
		case c.Age < time.Duration(s.p.MinAge):
			young++
		case ok && pins[addr] == h.name:
			pinnedHere++
		case !ok || s.cooling(now, addr):
			// One move per client per cooldown, to its pin or not: a
			// pinned client lands where it should, so a second move
			// within the cooldown would be ping-pong with its new server.
			cooling++
		case pinned:
			cands = append(cands, c)
		case pinnedOnly:
			share++
		case !(h.factor*c.Rate < room):
			heavy++
		default:
			cands = append(cands, c)
		}
	}
	slices.SortFunc(cands, func(a, b ShedSession) int {
		if c := cmp.Compare(b.Rate, a.Rate); c != 0 {
			return c
		}
		if c := strings.Compare(a.ID, b.ID); c != 0 {
			return c
		}
		return cmp.Compare(a.Serial, b.Serial)
	})
	var picked []ShedSession
	used := map[string]bool{}
	load := h.load
	for len(picked) < budget && len(land) > 0 {
		to := 0 // the predicted landing server: the least loaded
		rest := math.Inf(-1)
		for i, l := range land {
			if l.load < land[to].load {
				to = i
			}
		}
		for i, l := range land {
			if i != to && l.load > rest {
				rest = l.load
			}
		}
		best, bestTo, bestMax, bestDist := -1, -1, math.Inf(1), math.Inf(1)
		for i, c := range cands {
			addr, _ := clientAddr(c.Client)
			if used[addr] {
				continue
			}
			after := load - h.factor*c.Rate
			dist := math.Abs(after - mean)
			if !(dist < math.Abs(load-mean)-shedMinGain*mean) {
				continue
			}
			lands, others := to, rest
			if p := pinnedElsewhere(pins, c, h.name); p != "" {
				lands = slices.IndexFunc(land, func(l landing) bool { return l.name == p })
				if lands < 0 {
					continue // its pin's server has no data: no telling
				}
				landed := land[lands].load + land[lands].factor*c.Rate
				if !(max(after, landed) < load) {
					continue
				}
				others = math.Inf(-1)
				for j, l := range land {
					if j != lands {
						others = max(others, l.load)
					}
				}
			} else if landed := land[to].load + land[to].factor*c.Rate; !(landed < s.p.Above*mean) {
				continue
			}
			landed := land[lands].load + land[lands].factor*c.Rate
			busiest := max(after, landed, others)
			if busiest < bestMax || busiest == bestMax && dist < bestDist {
				best, bestTo, bestMax, bestDist = i, lands, busiest, dist
			}
		}
		if best < 0 {
			break
		}
		c := cands[best]
		picked = append(picked, c)
		addr, _ := clientAddr(c.Client)
		used[addr] = true
		load -= h.factor * c.Rate
		land[bestTo].load += land[bestTo].factor * c.Rate
		cands = slices.Delete(cands, best, best+1)
	}
	if len(picked) > 0 {
		return picked, ""
	}
	why := fmt.Sprintf("no session to close (%d sessions: %d eligible, none brings it %s× mean closer to the mean; %d younger than min_age, %d client in cooldown or unknown, %d not measured, %d too heavy for any server",
		total, total-young-cooling-unmeasured-heavy-pinnedHere-share, ratioText(shedMinGain), young, cooling, unmeasured, heavy)
	if pins != nil {
		why += fmt.Sprintf(", %d pinned to it", pinnedHere)
	}
	if pinnedOnly {
		why += fmt.Sprintf(", %d not pinned elsewhere (max_share allows none)", share)
	}
	return nil, why + ")"
}

// landing is a server a shed session may land on: its load and the load one
// unit of session rate adds to it.
type landing struct {
	name         string
	load, factor float64
}

// landings are the servers with valid data other than hot (first entry per
// name), in input order.
func landings(servers []ShedServer, hot string) []landing {
	var out []landing
	seen := map[string]bool{hot: true}
	for _, sv := range servers {
		if seen[sv.Name] {
			continue
		}
		seen[sv.Name] = true
		if validLoad(sv.Load) {
			out = append(out, landing{sv.Name, sv.Load, sv.factor()})
		}
	}
	return out
}

// pinnedElsewhere is the server the session's client is pinned to when it
// is not from ("" otherwise).
func pinnedElsewhere(pins map[string]string, c ShedSession, from string) string {
	if pins == nil {
		return ""
	}
	addr, ok := clientAddr(c.Client)
	if !ok {
		return ""
	}
	if to := pins[addr]; to != from {
		return to
	}
	return ""
}

// cooling reports whether a session of addr was closed within the cooldown.
func (s *Shedder) cooling(now time.Time, addr string) bool {
	last, ok := s.clients[addr]
	return ok && now.Sub(last) < time.Duration(s.p.Cooldown)
}

// shedMean is the mean and the least load of the servers with valid data
// (first entry per name), and how many they are.
func shedMean(servers []ShedServer) (mean, lowest float64, n int) {
	sum := 0.0
	seen := map[string]bool{}
	for _, sv := range servers {
		if seen[sv.Name] {
			continue
		}
		seen[sv.Name] = true
		if validLoad(sv.Load) {
			if n == 0 || sv.Load < lowest {
				lowest = sv.Load
			}
			sum += sv.Load
			n++
		}
	}
	if n == 0 || isInf(sum) {
		return 0, 0, n
	}
	return sum / float64(n), lowest, n
}

// clientAddr is the IP of an "ip:port" client address (the whole string
// when it has no port); false when unknown.
func clientAddr(client string) (string, bool) {
	if client == "" {
		return "", false
	}
	if i := strings.LastIndexByte(client, ':'); i > 0 {
		if _, err := strconv.ParseUint(client[i+1:], 10, 16); err == nil {
			return client[:i], true
		}
	}
	return client, true
}

func ratioText(r float64) string { return strconv.FormatFloat(r, 'f', 1, 64) }

func unitText(u string) string {
	if u == "" {
		return "/s"
	}
	return u
}
