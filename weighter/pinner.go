package weighter

import (
	"cmp"
	"container/heap"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"
)

// PinServer is one server of the backend as the Pinner sees it.
type PinServer struct {
	Name string
	// Load is the server's whole load in the plan's unit; NaN or negative =
	// no data (such a server keeps its pins but gets no new one).
	Load float64
	// Factor turns a client's rate (the fast signal's unit) into Load's
	// unit, like ShedServer.Factor (0 or invalid = 1).
	Factor float64
	// Pinnable: the server can take a pin: ready, up, weight > 0 and not
	// drained by anyone (the daemon's plan included). False for every other
	// case: a pin there beats the drain, so it is withdrawn.
	Pinnable bool
	// Why says why it cannot take a pin ("drained", "down", …), for reasons.
	Why string
	// Conns is its open connections as HAProxy counts them (scur): in a
	// storm, those the socket table has not measured yet are clients back
	// on it.
	Conns int
}

func (sv PinServer) factor() float64 {
	if !(sv.Factor > 0) || isInf(sv.Factor) {
		return 1
	}
	return sv.Factor
}

// PinInput is what the Pinner sees in one cycle of one backend.
type PinInput struct {
	Servers []PinServer
	// Clients are the backend's client addresses with their rates (the
	// fast read's, Signal.Clients); nil when not listed (no pin is then
	// forgotten for being quiet).
	Clients []Client
	// Sessions are the backend's open connections with their server and
	// rate: where a client sits is learned by matching its rate to them,
	// since the kernel does not tie a client socket to a server socket.
	Sessions []ShedSession
	// Table is the pin table as read. TableErr is the read's error: one
	// wrapping ErrNoPinTable (the backend cannot pin: nothing is planned
	// and the Pinner forgets its pins), ErrPinTableFull (Table is as read
	// and full: no Set), or any other (the table is unknown: the Pinner's
	// own pins on servers that cannot take one are cleared blind, no Set).
	Table    PinTable
	TableErr error
	// Hold: the coverage guard holds the backend: withdrawals only.
	Hold       bool
	HoldReason string
	// Unit names the client rates in reasons ("B/s"); "" = "/s".
	Unit string
}

// PinPlan is the outcome of one cycle: the pins the backend should have,
// the writes that get the table there, and why.
type PinPlan struct {
	Time  time.Time `json:"time"`
	Table string    `json:"table,omitempty"`
	// Pins are the pins wanted after this cycle, sorted by client.
	Pins []Pin `json:"pins,omitempty"`
	// Changes are the writes against the table as read.
	Changes PinChanges `json:"changes"`
	// Reason says why nothing is set (or what held it back).
	Reason string `json:"reason,omitempty"`
	// Why has one line per Set and Clear: who, from where to where, why.
	Why []PinWhy `json:"why,omitempty"`
	// Imbalance is the projected max/mean of the pinnable servers with the
	// pinned clients where they sit now, Projected with them where the
	// plan pins them (0 when undefined).
	Imbalance float64 `json:"imbalance"`
	Projected float64 `json:"projected"`
	// NoTable: the backend has no pin table (ErrNoPinTable): it does not
	// pin, and weighting goes on as without a Pinner. TableErr is the
	// table read's error otherwise ("" when it was read).
	NoTable  bool   `json:"no_table,omitempty"`
	TableErr string `json:"table_error,omitempty"`
	// Full: the table has no room for another entry (no new pin is set).
	Full bool `json:"full,omitempty"`
	// Storm is how many clients this plan pinned as a reconnect storm's
	// (pinstorm.go): their connections closed at once with most of the
	// load, and they are not back yet; 0 outside a storm. StormBegan: this
	// plan found the storm.
	Storm      int  `json:"storm,omitempty"`
	StormBegan bool `json:"storm_began,omitempty"`

	// inForce are the pins in the table once Changes are written (as far
	// as the table was read): where a shed client lands. read is the
	// table as read (client → server).
	inForce, read map[string]string
}

// Pin table states (PinPlan.TableState): what the metrics label, the status
// page shows and the log says once per change.
const (
	PinTableOK      = "ok"
	PinTableMissing = "missing"
	PinTableFull    = "full"
	PinTableError   = "error"
)

// TableState says what the plan found of the pin table: ok, missing (no
// table: the backend does not pin), error (not read) or full.
func (p *PinPlan) TableState() string {
	switch {
	case p.NoTable:
		return PinTableMissing
	case p.TableErr != "":
		return PinTableError
	case p.Full:
		return PinTableFull
	}
	return PinTableOK
}

// InForce returns the pins in the table once the plan's changes are
// written, client → server; nil when the backend does not pin (no table)
// or its table could not be read: its sheds are then a backend's that
// does not pin.
func (p *PinPlan) InForce() map[string]string {
	if p == nil {
		return nil
	}
	return p.inForce
}

// PinWhy explains one Set or Clear.
type PinWhy struct {
	Client string `json:"client"`
	// Rate is the client's rate (the fast signal's unit), 0 when not measured.
	Rate float64 `json:"rate"`
	// From is where it sits now as matched ("" unknown); To where it is
	// pinned ("" for a withdrawal).
	From string `json:"from,omitempty"`
	To   string `json:"to,omitempty"`
	// Gain is the drop of the projected max/mean the pin brings.
	Gain   float64 `json:"gain"`
	Reason string  `json:"reason"`
	// Storm: the client is placed as one of a storm's (pinstorm.go): its
	// connections closed with most of the load, and it reconnects anyway,
	// so its pin moves whatever max_moves and a hold say.
	Storm bool `json:"storm,omitempty"`
}

// DryRun is the line a dry run prints for it.
func (w PinWhy) DryRun() string { return "would " + w.Reason }

// pinState is what the Pinner remembers of one pin it wants.
type pinState struct {
	server string
	heavy  time.Time // the last time the client was seen heavy (or pinned)
	// since is when the pin got its server (zero: not known, a pin found
	// in the table): it is not moved again within the policy's settle.
	since time.Time
	// rate is the client's last measured rate, at seen: a pinned client
	// between two connections (it left and is coming back, to its pin) is
	// counted on its pin's server with it for pinAbsentGrace.
	rate float64
	seen time.Time
}

// pinAbsentGrace is how long a pinned client that is not connected still
// counts on its pin's server with its last rate. A returning client is back
// in seconds (a reconnect, a restart's storm); counted as nothing in that gap,
// its server looked empty and the plan sent another heavy client there,
// which met it when it came back (two of the three heaviest on one server,
// on the real bench). Longer than a storm's spread, short against forget:
// a client that left for good stops holding room on its server soon.
const pinAbsentGrace = 30 * time.Second

// Pinner plans the pins of one backend. It remembers the pins it wants
// (so that a table HAProxy emptied, a restart, is written again at once) and
// when each client was last heavy (to forget quiet ones). Its methods are
// safe for concurrent use.
type Pinner struct {
	p PinPolicy

	mu    sync.Mutex
	pins  map[string]*pinState
	mem   pinMemory
	storm *pinStorm // the storm under way; nil outside one
}

// NewPinner validates p and returns a Pinner with no pins.
func NewPinner(p PinPolicy) (*Pinner, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("invalid pin policy: %w", err)
	}
	return &Pinner{p: p, pins: map[string]*pinState{}}, nil
}

// Policy returns the policy the Pinner was built with.
func (pn *Pinner) Policy() PinPolicy { return pn.p }

// Wanted returns the pins the Pinner wants, sorted by client.
func (pn *Pinner) Wanted() []Pin {
	pn.mu.Lock()
	defer pn.mu.Unlock()
	out := make([]Pin, 0, len(pn.pins))
	for c, st := range pn.pins {
		out = append(out, Pin{Client: c, Server: st.server})
	}
	sortPins(out)
	return out
}

// pinRateTolerance is how far (as a share) a connection's rate may be from
// a client's per-connection rate and still be taken for it.
const pinRateTolerance = 0.25

// pinMatchScan bounds how many connections either side of the nearest rate
// the matching looks at for one client connection.
const pinMatchScan = 32

// pinMaxConns bounds the connections matched per client.
const pinMaxConns = 16

// pinBin is one server of the plan.
type pinBin struct {
	name     string
	load     float64 // as measured; NaN when no data
	factor   float64
	pinnable bool
	why      string
	target   bool    // pinnable with data: may take new pins
	base     float64 // load without the pinned clients believed on it
	proj     float64 // base + the clients pinned to it
}

// pinClient is one client the plan places.
type pinClient struct {
	addr    string
	rate    float64 // NaN when not measured
	load    float64 // rate × the mean factor; 0 when not measured
	conns   int     // its open connections
	at      int     // the bin it sits on as matched; -1 unknown
	on      []pinShare
	pinned  int  // the bin its current pin names; -1 none
	inTable bool // its pin is in the table as read
	foreign bool // its pin is another balancer's (a shared table): it stays
	to      int  // the bin the plan pins it to; -1 none
	chosen  bool // it has a pin after this plan
	moved   bool
	// settling: its pin is younger than settle (no move yet).
	settling bool
	// absent: the last measured rate of a pinned client with no rate now
	// (between two connections, or silent this read), expected back on its
	// pin at that rate (0: none, or not measured for pinAbsentGrace).
	absent float64
	gain   float64
}

// pinShare is a part of a client's rate matched on one bin.
type pinShare struct {
	bin  int
	rate float64
}

// Plan decides this cycle's pins. Call it once per cycle.
func (pn *Pinner) Plan(now time.Time, in PinInput) PinPlan {
	pn.mu.Lock()
	defer pn.mu.Unlock()
	plan := PinPlan{Time: now, Table: in.Table.Name}
	began := pn.mem.remember(in.Clients, pn.p.MaxPins)
	if began != nil {
		pn.storm = &pinStorm{clients: began, until: now.Add(pinStormFor)}
	}
	if pn.storm != nil && (now.After(pn.storm.until) || in.Clients == nil) {
		pn.storm = nil
	}
	if errors.Is(in.TableErr, ErrNoPinTable) {
		clear(pn.pins)
		pn.storm = nil
		plan.NoTable = true
		plan.Reason = in.TableErr.Error()
		if !strings.HasPrefix(plan.Reason, ErrNoPinTable.Error()) {
			plan.Reason = ErrNoPinTable.Error() + ": " + plan.Reason
		}
		return plan
	}
	full := errors.Is(in.TableErr, ErrPinTableFull) || in.Table.Size > 0 && in.Table.Used >= in.Table.Size
	plan.Full = full
	if in.TableErr != nil && !errors.Is(in.TableErr, ErrPinTableFull) {
		plan.TableErr = in.TableErr.Error()
	}
	known := in.TableErr == nil || errors.Is(in.TableErr, ErrPinTableFull)

	bins, index := pinBins(in.Servers)
	var clears []string
	cleared := map[string]bool{}
	clearOne := func(client string, w PinWhy) {
		if cleared[client] {
			return
		}
		cleared[client] = true
		clears = append(clears, client)
		plan.Why = append(plan.Why, w)
	}

	// The pins in force: the table's, and the Pinner's own that it lacks
	// (an HAProxy restarted or reloaded without peers lost them).
	cur := map[string]string{}
	inTable := map[string]string{}
	if known {
		for _, p := range in.Table.Pins {
			if p.Client == "" {
				continue
			}
			if _, dup := inTable[p.Client]; !dup {
				inTable[p.Client] = p.Server
				cur[p.Client] = p.Server
			}
		}
		for _, c := range in.Table.Stray {
			if c != "" {
				if _, ok := inTable[c]; !ok {
					clearOne(c, PinWhy{Client: c, Reason: fmt.Sprintf("clear the pin of %s: its server id is no server of the backend", c)})
				}
			}
		}
	}
	for c, st := range pn.pins {
		if _, ok := cur[c]; !ok {
			cur[c] = st.server
		}
	}
	// A shared table (replicated between balancers by HAProxy's peers):
	// an entry this Pinner did not write is another balancer's. It stays
	// where it is, in force for the plan, and is never the Pinner's to
	// move, forget or count in max_pins; only withdrawn from a server that
	// cannot take a pin, as every pin is (HAProxy's peers do not replicate
	// a clear: each balancer's daemon clears its own table).
	foreign := map[string]string{}
	if pn.p.Shared {
		for c, s := range cur {
			if pn.pins[c] == nil {
				foreign[c] = s
				delete(cur, c)
			}
		}
	}
	for _, c := range sortedKeys(foreign) {
		s := foreign[c]
		if i, ok := index[s]; !ok || !bins[i].pinnable {
			why := "it is no server of the backend"
			if ok {
				why = "it cannot take a pin (" + cmp.Or(bins[i].why, "not ready") + ")"
			}
			clearOne(c, PinWhy{Client: c, From: s, Reason: fmt.Sprintf("clear the pin of %s on %s (another balancer's): %s", c, s, why)})
			delete(foreign, c)
		}
	}

	// Withdrawal first, always: a pin beats a drain.
	for _, c := range sortedKeys(cur) {
		s := cur[c]
		i, ok := index[s]
		if ok && bins[i].pinnable {
			continue
		}
		why := "it is no server of the backend"
		if ok {
			why = "it cannot take a pin (" + cmp.Or(bins[i].why, "not ready") + ")"
		}
		_, wasInTable := inTable[c]
		if wasInTable || !known {
			clearOne(c, PinWhy{Client: c, From: s, Reason: fmt.Sprintf("clear the pin of %s on %s: %s", c, s, why)})
		}
		delete(cur, c)
		delete(pn.pins, c)
	}

	mean, n := pinMean(bins)
	meanFactor := pinMeanFactor(bins)
	heavyMean := pinHeavyMean(bins, n)
	heavy := func(c Client) bool {
		return n > 0 && mean > 0 && c.Rate > 0 && !isInf(c.Rate) && c.Rate*meanFactor >= pn.p.Heavy*heavyMean
	}
	// spread: a client whose several connections together carry more than
	// a server's mean load (many users behind one NAT address, a client
	// pool) is better spread by the weights, connection by connection,
	// than pinned whole to one server it would make the hottest.
	spread := func(c Client) bool {
		return c.Conns > 1 && c.Rate > 0 && !isInf(c.Rate) && c.Rate*meanFactor > heavyMean
	}
	clients := pinClients(in.Clients, cur, foreign, heavy)
	nSpread := 0
	for _, c := range sortedKeys(cur) {
		if cl, ok := clients[c]; ok && n > 0 && heavyMean > 0 && spread(cl) {
			if _, ok := inTable[c]; ok || !known {
				clearOne(c, PinWhy{Client: c, From: cur[c], Rate: cl.Rate, Reason: fmt.Sprintf(
					"clear the pin of %s on %s: its %d connections carry %s× the mean server load, spread by the weights", c, cur[c], cl.Conns, shortRatio(cl.Rate*meanFactor/heavyMean))})
			}
			delete(cur, c)
			delete(pn.pins, c)
		}
	}

	// Quiet clients lose their pins.
	for _, c := range sortedKeys(cur) {
		st := pn.pins[c]
		if st == nil {
			st = &pinState{server: cur[c], heavy: now}
			pn.pins[c] = st
		}
		if st.server != cur[c] {
			st.server, st.since = cur[c], time.Time{} // changed by someone else
		}
		if cl, ok := clients[c]; ok {
			if heavy(cl) {
				st.heavy = now
			}
			if cl.Rate > 0 && !isInf(cl.Rate) {
				st.rate, st.seen = cl.Rate, now
			}
		}
		if in.Clients == nil {
			continue // the clients were not listed: no one is quiet for it
		}
		if quiet := now.Sub(st.heavy); quiet >= time.Duration(pn.p.Forget) {
			if _, ok := inTable[c]; ok || !known {
				clearOne(c, PinWhy{Client: c, From: cur[c], Reason: fmt.Sprintf("clear the pin of %s on %s: not heavy for %s (forget %s)", c, cur[c], AgeText(quiet), pn.p.Forget)})
			}
			delete(cur, c)
			delete(pn.pins, c)
		}
	}

	if pn.storm != nil && known && !full {
		plan.Changes.Clear = clears
		placed := pn.stormPlace(&plan, began != nil, in, bins, index, cur, foreign, inTable, func(c string, w PinWhy) {
			clearOne(c, w)
			plan.Changes.Clear = clears
		}, cleared)
		if placed {
			return plan
		}
		pn.storm = nil // every client of the storm is back
	}

	noSet, again := "", false
	switch {
	case !known:
		noSet = "pin table could not be read: " + in.TableErr.Error()
	case full:
		noSet = fmt.Sprintf("pin table %s full (%d of %d entries)", in.Table.Name, in.Table.Used, in.Table.Size)
	case in.Hold:
		// No new pin on held loads; the pins the table lost are written
		// again (an HAProxy restart resets the loads the guard holds on,
		// and its clients come back in seconds: no time to wait for them).
		noSet, again = "hold: "+cmp.Or(in.HoldReason, "coverage guard"), true
	case n == 0 || !(mean > 0):
		// No new pin without loads; the pins the table lost are
		// written again all the same (a restart, when loads are short).
		noSet, again = fmt.Sprintf("servers with data: %d, mean load %s (needs one and a positive mean)", n, LoadText(mean)), true
	}
	if noSet != "" {
		// Nothing set: the pins in force stay as they are, within
		// max_pins (the heaviest, a table written under another policy).
		plan.Reason = noSet
		for c, s := range cur {
			plan.Pins = append(plan.Pins, Pin{Client: c, Server: s})
		}
		rate := func(c string) float64 { return finite(clients[c].Rate) }
		slices.SortFunc(plan.Pins, func(a, b Pin) int {
			return cmp.Or(cmp.Compare(rate(b.Client), rate(a.Client)), strings.Compare(a.Client, b.Client))
		})
		for _, p := range plan.Pins[min(len(plan.Pins), pn.p.MaxPins):] {
			if _, ok := inTable[p.Client]; ok || !known {
				clearOne(p.Client, PinWhy{Client: p.Client, From: p.Server, Rate: rate(p.Client),
					Reason: fmt.Sprintf("clear the pin of %s on %s: lighter than the %d heaviest (max_pins)", p.Client, p.Server, pn.p.MaxPins)})
			}
		}
		plan.Pins = plan.Pins[:min(len(plan.Pins), pn.p.MaxPins)]
		if again {
			room := pinRoom(in.Table, inTable, clears)
			plan.Pins = slices.DeleteFunc(plan.Pins, func(p Pin) bool {
				if _, ok := inTable[p.Client]; ok && !cleared[p.Client] {
					return false
				}
				room--
				return room < 0
			})
		}
		var why []PinWhy
		for _, p := range plan.Pins {
			if _, ok := inTable[p.Client]; again && (!ok || cleared[p.Client]) {
				why = append(why, PinWhy{Client: p.Client, To: p.Server, Rate: rate(p.Client),
					Reason: fmt.Sprintf("pin %s to %s again: the table lost it", p.Client, p.Server)})
			}
		}
		pn.finish(&plan, clears, inTable, again, why)
		return plan
	}

	// The clients placed: every pinned one, and the heavy ones.
	var placed []*pinClient
	for c, s := range cur {
		pc := &pinClient{addr: c, rate: math.NaN(), at: -1, pinned: index[s], to: -1}
		_, pc.inTable = inTable[c]
		st := pn.pins[c]
		if st != nil && !st.since.IsZero() && now.Sub(st.since) < time.Duration(pn.p.Settle) {
			pc.settling = true
		}
		if cl, ok := clients[c]; ok {
			pc.rate, pc.conns = cl.Rate, cl.Conns
		}
		if !(pc.rate > 0) && st != nil && st.rate > 0 && now.Sub(st.seen) < pinAbsentGrace {
			pc.absent = st.rate
		}
		placed = append(placed, pc)
	}
	for c, s := range foreign {
		pc := &pinClient{addr: c, rate: math.NaN(), at: -1, pinned: index[s], to: -1, inTable: true, foreign: true}
		if cl, ok := clients[c]; ok {
			pc.rate, pc.conns = cl.Rate, cl.Conns
		}
		placed = append(placed, pc)
	}
	for _, cl := range clients {
		_, mine := cur[cl.Addr]
		_, theirs := foreign[cl.Addr]
		if !mine && !theirs && heavy(cl) && spread(cl) {
			nSpread++
			continue
		}
		if !mine && !theirs && heavy(cl) {
			placed = append(placed, &pinClient{addr: cl.Addr, rate: cl.Rate, conns: cl.Conns, at: -1, pinned: -1, to: -1})
		}
	}
	for _, pc := range placed {
		switch {
		case pc.rate > 0 && !isInf(pc.rate):
			pc.load = pc.rate * meanFactor
		case pc.absent > 0:
			// On no server now (so on no bin's measured load), on its
			// pin's when it is back.
			pc.load = pc.absent * meanFactor
		}
	}
	// Heaviest first.
	slices.SortFunc(placed, func(a, b *pinClient) int {
		if c := cmp.Compare(b.load, a.load); c != 0 {
			return c
		}
		return strings.Compare(a.addr, b.addr)
	})

	// Which to pin: the pins in the table first (they need no room), then
	// by weight, within max_pins and the table's room.
	room := pinRoom(in.Table, inTable, clears)
	var chosen []*pinClient
	own := 0 // chosen that are the Pinner's own (max_pins counts those)
	for _, pc := range placed {
		switch {
		case pc.foreign:
			pc.chosen = true
			chosen = append(chosen, pc)
		case pc.inTable && own < pn.p.MaxPins:
			pc.chosen = true
			chosen = append(chosen, pc)
			own++
		}
	}
	left, leftWhy := 0, ""
	for _, pc := range placed {
		switch {
		case pc.inTable:
			continue
		case own >= pn.p.MaxPins:
			leftWhy = fmt.Sprintf("max_pins %d", pn.p.MaxPins)
		case room <= 0:
			leftWhy = fmt.Sprintf("table room %d", in.Table.Size-in.Table.Used)
		default:
			room--
			pc.chosen = true
			chosen = append(chosen, pc)
			own++
			continue
		}
		left++
	}
	for _, pc := range placed {
		if pc.inTable && !pc.chosen {
			clearOne(pc.addr, PinWhy{Client: pc.addr, From: cur[pc.addr], Rate: finite(pc.rate),
				Reason: fmt.Sprintf("clear the pin of %s on %s: lighter than the %d heaviest (max_pins)", pc.addr, cur[pc.addr], pn.p.MaxPins)})
		}
	}

	// Where the heavy ones sit; a pinned client not found (light now, or
	// reconnecting) is taken to sit where its pin sends it.
	var heavies []*pinClient
	for _, pc := range chosen {
		if pc.load >= pn.p.Heavy*mean {
			heavies = append(heavies, pc)
		}
	}
	locate(heavies, index, in.Sessions)
	for _, pc := range chosen {
		if pc.on == nil && pc.pinned >= 0 && pc.rate > 0 && !isInf(pc.rate) {
			pc.on = []pinShare{{bin: pc.pinned, rate: pc.rate}}
		}
	}
	for i := range bins {
		bins[i].base = bins[i].load
	}
	for _, pc := range chosen {
		for _, sh := range pc.on {
			bins[sh.bin].base -= sh.rate * bins[sh.bin].factor
		}
	}
	for i := range bins {
		bins[i].base = max(bins[i].base, 0)
		bins[i].proj = bins[i].base
	}
	plan.Imbalance = pinImbalance(bins, chosen, func(pc *pinClient) int {
		if pc.at >= 0 {
			return pc.at
		}
		return pc.pinned
	})

	// The pins in force stay; the new ones go, heaviest first, to the
	// server with the least projected load (LPT), or stay where they sit
	// when that is within min_gain of it.
	for _, pc := range chosen {
		if pc.pinned >= 0 {
			pc.to = pc.pinned
			if bins[pc.to].target {
				bins[pc.to].proj += pc.load / meanFactor * bins[pc.to].factor
			}
		}
	}
	h := &binHeap{bins: bins, pos: make([]int, len(bins))}
	for i := range bins {
		if bins[i].target {
			h.pos[i] = len(h.idx)
			h.idx = append(h.idx, i)
		}
	}
	heap.Init(h)
	for _, pc := range chosen {
		if pc.pinned >= 0 || h.Len() == 0 {
			continue
		}
		to := h.idx[0]
		if at := pc.at; at >= 0 && bins[at].target &&
			bins[at].proj+pc.load/meanFactor*bins[at].factor <= bins[to].proj+pc.load/meanFactor*bins[to].factor+pn.p.MinGain*mean {
			// Where it sits, unless the least loaded is better by
			// min_gain: a pin elsewhere is a move, when the client
			// reconnects or is shed.
			to = at
		}
		pc.to = to
		bins[to].proj += pc.load / meanFactor * bins[to].factor
		heap.Fix(h, h.pos[to])
	}
	pn.moves(bins, chosen, mean, meanFactor)
	plan.Projected = pinImbalance(bins, chosen, func(pc *pinClient) int { return pc.to })
	gains(bins, chosen, meanFactor)

	var why []PinWhy
	for _, pc := range chosen {
		if pc.to < 0 || pc.foreign {
			continue
		}
		plan.Pins = append(plan.Pins, Pin{Client: pc.addr, Server: bins[pc.to].name})
		if s, ok := inTable[pc.addr]; ok && s == bins[pc.to].name && !cleared[pc.addr] {
			continue
		}
		w := PinWhy{Client: pc.addr, Rate: finite(pc.rate), To: bins[pc.to].name, Gain: pc.gain}
		if pc.at >= 0 {
			w.From = bins[pc.at].name
		}
		rate := "not measured"
		if pc.rate > 0 {
			rate = RateText(pc.rate) + " " + unitText(in.Unit)
		}
		switch {
		case pc.moved:
			w.Reason = fmt.Sprintf("move the pin of %s (%s) from %s to %s: projected max/mean %s lower",
				pc.addr, rate, bins[pc.pinned].name, w.To, gainText(pc.gain))
		case pc.pinned >= 0:
			w.Reason = fmt.Sprintf("pin %s (%s) to %s again: the table lost it", pc.addr, rate, w.To)
		case pc.at == pc.to:
			w.Reason = fmt.Sprintf("pin %s (%s, %s× mean server load) to %s, where it sits", pc.addr, rate, shortRatio(pc.load/mean), w.To)
		default:
			w.Reason = fmt.Sprintf("pin %s (%s, %s× mean server load) to %s, now on %s: projected max/mean %s lower",
				pc.addr, rate, shortRatio(pc.load/mean), w.To, cmp.Or(w.From, "unknown"), gainText(pc.gain))
		}
		why = append(why, w)
	}
	if left > 0 {
		plan.Reason = fmt.Sprintf("%d heavy clients not pinned (%s)", left, leftWhy)
	}
	if nSpread > 0 {
		note := fmt.Sprintf("%d clients of several connections heavier than the mean server load left to the weights", nSpread)
		if plan.Reason != "" {
			note = plan.Reason + "; " + note
		}
		plan.Reason = note
	}
	pn.finish(&plan, clears, inTable, true, why)
	for _, pc := range chosen {
		// A pin set now has its client's rate from this plan on.
		if st := pn.pins[pc.addr]; st != nil && st.seen.IsZero() && pc.rate > 0 && !isInf(pc.rate) {
			st.rate, st.seen = pc.rate, now
		}
	}
	if plan.Changes.Empty() && plan.Reason == "" {
		switch {
		case len(plan.Pins) == 0:
			plan.Reason = fmt.Sprintf("no heavy client (none sends %s× the mean server load)", shortRatio(pn.p.Heavy))
		default:
			plan.Reason = fmt.Sprintf("%d pins in place", len(plan.Pins))
		}
	}
	return plan
}

// unwritten takes back what the Pinner took from plan for written: a dry
// run writes nothing, so its next plan must find the table as it is (and
// say "would pin" again, not that the table lost a pin it never had).
func (pn *Pinner) unwritten(plan *PinPlan) {
	if plan == nil {
		return
	}
	pn.mu.Lock()
	defer pn.mu.Unlock()
	for _, p := range plan.Changes.Set {
		st := pn.pins[p.Client]
		switch old, ok := plan.read[p.Client]; {
		case st == nil:
		case ok:
			st.server, st.since = old, time.Time{}
		default:
			delete(pn.pins, p.Client)
		}
	}
}

// pinRoom is how many entries the table can take once clears are written
// (unbounded for a table of unknown size).
func pinRoom(t PinTable, inTable map[string]string, clears []string) int {
	if t.Size <= 0 {
		return math.MaxInt
	}
	room := t.Size - t.Used
	for _, c := range clears {
		if _, ok := inTable[c]; ok {
			room++
		}
	}
	return room
}

// finish sorts the plan's pins, writes the changes against the table as
// read (Set only when set is true), and makes the plan's pins the Pinner's.
func (pn *Pinner) finish(plan *PinPlan, clears []string, inTable map[string]string, set bool, why []PinWhy) {
	sortPins(plan.Pins)
	plan.Changes.Clear = clears
	cleared := make(map[string]bool, len(clears))
	for _, c := range clears {
		cleared[c] = true
	}
	if set {
		for _, p := range plan.Pins {
			if s, ok := inTable[p.Client]; !ok || s != p.Server || cleared[p.Client] {
				plan.Changes.Set = append(plan.Changes.Set, p)
			}
		}
	}
	plan.Why = append(plan.Why, why...)
	plan.read = inTable
	plan.inForce = make(map[string]string, len(inTable))
	for c, s := range inTable {
		if !cleared[c] {
			plan.inForce[c] = s
		}
	}
	for _, p := range plan.Changes.Set {
		plan.inForce[p.Client] = p.Server
	}
	keep := make(map[string]bool, len(plan.Pins))
	for _, p := range plan.Pins {
		keep[p.Client] = true
		switch st := pn.pins[p.Client]; {
		case st == nil:
			pn.pins[p.Client] = &pinState{server: p.Server, heavy: plan.Time, since: plan.Time}
		case st.server != p.Server:
			st.server, st.since = p.Server, plan.Time
		}
	}
	for c := range pn.pins {
		if !keep[c] {
			delete(pn.pins, c)
		}
	}
}

// moves moves existing pins off the busiest server while one lowers the
// projected max/mean by min_gain, at most max_moves.
func (pn *Pinner) moves(bins []pinBin, chosen []*pinClient, mean, mf float64) {
	onBin := map[int][]*pinClient{}
	for _, pc := range chosen {
		if !pc.foreign && pc.pinned >= 0 && pc.to >= 0 && bins[pc.to].target && pc.load > 0 {
			onBin[pc.to] = append(onBin[pc.to], pc)
		}
	}
	for range pn.p.MaxMoves {
		hi, hi2, lo := -1, math.Inf(-1), -1
		for i := range bins {
			if !bins[i].target {
				continue
			}
			switch {
			case hi < 0 || bins[i].proj > bins[hi].proj:
				if hi >= 0 {
					hi2 = bins[hi].proj
				}
				hi = i
			case bins[i].proj > hi2:
				hi2 = bins[i].proj
			}
			if lo < 0 || bins[i].proj < bins[lo].proj {
				lo = i
			}
		}
		if hi < 0 || hi == lo {
			return
		}
		var best *pinClient
		bestMax := bins[hi].proj
		for _, pc := range onBin[hi] {
			if pc.moved || pc.settling {
				continue
			}
			from := bins[hi].proj - pc.load*bins[hi].factor/mf
			to := bins[lo].proj + pc.load*bins[lo].factor/mf
			if m := max(hi2, from, to); m < bestMax || m == bestMax && best != nil && pc.load > best.load {
				best, bestMax = pc, m
			}
		}
		if best == nil {
			return
		}
		gain := (bins[hi].proj - bestMax) / mean
		if !(gain >= pn.p.MinGain) || gain <= 0 {
			return
		}
		bins[hi].proj -= best.load * bins[hi].factor / mf
		bins[lo].proj += best.load * bins[lo].factor / mf
		best.to, best.moved, best.gain = lo, true, gain
		onBin[hi] = slices.DeleteFunc(onBin[hi], func(pc *pinClient) bool { return pc == best })
		onBin[lo] = append(onBin[lo], best)
	}
}

// gains sets each new pin's gain: the projected max/mean with the client
// where it sits, everyone else as planned, less the planned one.
func gains(bins []pinBin, chosen []*pinClient, mf float64) {
	var top [3]int // the three highest target bins
	for i := range top {
		top[i] = -1
	}
	sum, n := 0.0, 0
	for i := range bins {
		if !bins[i].target {
			continue
		}
		sum += bins[i].proj
		n++
		for k := range top {
			if top[k] < 0 || bins[i].proj > bins[top[k]].proj {
				copy(top[k+1:], top[k:len(top)-1])
				top[k] = i
				break
			}
		}
	}
	if n == 0 || !(sum > 0) || top[0] < 0 {
		return
	}
	after := bins[top[0]].proj / (sum / float64(n))
	for _, pc := range chosen {
		if pc.pinned >= 0 || pc.to < 0 || pc.at < 0 || pc.at == pc.to || !bins[pc.at].target {
			continue
		}
		dTo, dAt := pc.load/mf*bins[pc.to].factor, pc.load/mf*bins[pc.at].factor
		hi := max(bins[pc.to].proj-dTo, bins[pc.at].proj+dAt)
		for _, k := range top {
			if k >= 0 && k != pc.to && k != pc.at {
				hi = max(hi, bins[k].proj)
				break
			}
		}
		s := sum - dTo + dAt
		if s > 0 {
			pc.gain = hi/(s/float64(n)) - after
		}
	}
}

// pinBins are the servers, first per name, and their index by name.
func pinBins(servers []PinServer) ([]pinBin, map[string]int) {
	bins := make([]pinBin, 0, len(servers))
	index := make(map[string]int, len(servers))
	for _, sv := range servers {
		if _, dup := index[sv.Name]; dup || sv.Name == "" {
			continue
		}
		b := pinBin{name: sv.Name, load: sv.Load, factor: sv.factor(), pinnable: sv.Pinnable, why: sv.Why}
		if !validLoad(b.load) {
			b.load = math.NaN()
		}
		b.target = b.pinnable && validLoad(b.load)
		index[sv.Name] = len(bins)
		bins = append(bins, b)
	}
	return bins, index
}

// pinMean is the mean load of the servers that may take new pins, and how
// many they are.
func pinMean(bins []pinBin) (float64, int) {
	sum, n := 0.0, 0
	for _, b := range bins {
		if b.target {
			sum += b.load
			n++
		}
	}
	if n == 0 || isInf(sum) {
		return 0, n
	}
	return sum / float64(n), n
}

// pinHeavyMean is what a client is heavy against: the load of every server
// with data spread over the n that may take new pins, what each carries
// once the clients of those that cannot (drained, weight 0) have
// reconnected elsewhere. It is their mean when every server can take a pin.
// Against the pinnable servers' own mean, an operator's drain of the server
// holding the heavy clients made the light clients elsewhere heavy: a
// backend of 2 kB/s clients beside two of 400 kB/s pinned every light one
// when the heavies' server was set to weight 0.
func pinHeavyMean(bins []pinBin, n int) float64 {
	sum := 0.0
	for _, b := range bins {
		if validLoad(b.load) {
			sum += b.load
		}
	}
	if n == 0 || isInf(sum) {
		return 0
	}
	return sum / float64(n)
}

// pinMeanFactor is the mean calibration factor of the servers that may take
// new pins (1 when none): what a client's rate weighs before it is placed.
func pinMeanFactor(bins []pinBin) float64 {
	sum, n := 0.0, 0
	for _, b := range bins {
		if b.target {
			sum += b.factor
			n++
		}
	}
	if n == 0 || !(sum > 0) || isInf(sum) {
		return 1
	}
	return sum / float64(n)
}

// pinClients are the clients the plan looks at, by address: the pinned
// ones and the heavy ones (of 100,000 clients, a few hundred). An address
// listed twice counts with its heaviest entry.
func pinClients(in []Client, pinned, foreign map[string]string, heavy func(Client) bool) map[string]Client {
	out := map[string]Client{}
	for _, c := range in {
		if c.Addr == "" {
			continue
		}
		if !heavy(c) {
			_, mine := pinned[c.Addr]
			_, theirs := foreign[c.Addr]
			if !mine && !theirs {
				continue
			}
		}
		if old, ok := out[c.Addr]; !ok || finite(c.Rate) > finite(old.Rate) {
			out[c.Addr] = c
		}
	}
	return out
}

// locate learns where each client sits by matching its per-connection rate
// (rate / connections) to the open connections' rates (heaviest client
// first, each connection taken once): the nearest within pinRateTolerance,
// one on the client's pin server first (a client pinned earlier sits there
// once it reconnected). A client sits where most of its matched rate is.
func locate(clients []*pinClient, index map[string]int, sessions []ShedSession) {
	type conn struct {
		rate float64
		bin  int
	}
	// Only a connection near some client's per-connection rate can be
	// matched: the lighter ones (most of them) are not sorted.
	least := math.Inf(1)
	for _, pc := range clients {
		if pc.rate > 0 && !isInf(pc.rate) {
			least = min(least, pc.rate/float64(max(pc.conns, 1)))
		}
	}
	floor := (1 - pinRateTolerance) * least
	var conns []conn
	for _, s := range sessions {
		if s.Rate >= floor && !isInf(s.Rate) {
			if i, ok := index[s.Server]; ok {
				conns = append(conns, conn{s.Rate, i})
			}
		}
	}
	slices.SortFunc(conns, func(a, b conn) int { return cmp.Compare(a.rate, b.rate) })
	used := make([]bool, len(conns))
	for _, pc := range clients {
		if !(pc.rate > 0) || isInf(pc.rate) {
			continue
		}
		n := min(max(pc.conns, 1), pinMaxConns)
		per := pc.rate / float64(max(pc.conns, 1))
		var shares []pinShare
		j, _ := slices.BinarySearchFunc(conns, per, func(c conn, r float64) int { return cmp.Compare(c.rate, r) })
		for range n {
			best, bestD := -1, math.Inf(1)
			for k := max(j-pinMatchScan, 0); k < min(j+pinMatchScan, len(conns)); k++ {
				d := math.Abs(conns[k].rate - per)
				if used[k] || d > pinRateTolerance*per {
					continue
				}
				if conns[k].bin == pc.pinned {
					d = -1 // the pin server first
				}
				if d < bestD {
					best, bestD = k, d
				}
			}
			if best < 0 {
				break
			}
			used[best] = true
			i := slices.IndexFunc(shares, func(s pinShare) bool { return s.bin == conns[best].bin })
			if i < 0 {
				shares = append(shares, pinShare{bin: conns[best].bin})
				i = len(shares) - 1
			}
			shares[i].rate += conns[best].rate
		}
		pc.on = shares
		top := 0.0
		for _, sh := range shares {
			if sh.rate > top {
				pc.at, top = sh.bin, sh.rate
			}
		}
	}
}

// pinImbalance is the max/mean of the target servers' projected loads with
// every chosen client on where(client) (0 when undefined).
func pinImbalance(bins []pinBin, chosen []*pinClient, where func(*pinClient) int) float64 {
	loads := make([]float64, len(bins))
	for i, b := range bins {
		loads[i] = b.base
	}
	mf := pinMeanFactor(bins)
	for _, pc := range chosen {
		if w := where(pc); w >= 0 {
			loads[w] += pc.load / mf * bins[w].factor
		}
	}
	sum, hi, n := 0.0, 0.0, 0
	for i, b := range bins {
		if b.target {
			sum += loads[i]
			hi = max(hi, loads[i])
			n++
		}
	}
	if n == 0 || !(sum > 0) {
		return 0
	}
	return hi / (sum / float64(n))
}

// binHeap orders target bins by projected load (ties by name).
type binHeap struct {
	bins []pinBin
	idx  []int // bin indexes, a heap
	pos  []int // bin index → its place in idx
}

func (h *binHeap) Len() int { return len(h.idx) }
func (h *binHeap) Less(a, b int) bool {
	x, y := h.bins[h.idx[a]], h.bins[h.idx[b]]
	if x.proj != y.proj {
		return x.proj < y.proj
	}
	return x.name < y.name
}
func (h *binHeap) Swap(a, b int) {
	h.idx[a], h.idx[b] = h.idx[b], h.idx[a]
	h.pos[h.idx[a]], h.pos[h.idx[b]] = a, b
}

// Push and Pop are never called: the heap keeps its bins.
func (h *binHeap) Push(any) { panic("binHeap.Push") }
func (h *binHeap) Pop() any { panic("binHeap.Pop") }

func sortPins(pins []Pin) {
	slices.SortFunc(pins, func(a, b Pin) int {
		if c := strings.Compare(a.Client, b.Client); c != 0 {
			return c
		}
		return strings.Compare(a.Server, b.Server)
	})
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func finite(x float64) float64 {
	if math.IsNaN(x) || isInf(x) {
		return 0
	}
	return x
}

func gainText(g float64) string { return shortRatio(g) }

func shortRatio(r float64) string {
	return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.2f", r), "0"), ".")
}

// Inherit takes over old's pins and when each client was last heavy: a
// reload that changes a backend's pin policy builds a new Pinner, and
// without this the pins an HAProxy restart lost at the same time would not
// be written again, and every pinned client's quiet time would start over.
func (pn *Pinner) Inherit(old *Pinner) {
	if old == nil || old == pn {
		return
	}
	old.mu.Lock()
	pins := make(map[string]pinState, len(old.pins))
	for c, st := range old.pins {
		pins[c] = *st
	}
	old.mu.Unlock()
	pn.mu.Lock()
	defer pn.mu.Unlock()
	for c, st := range pins {
		if _, ok := pn.pins[c]; !ok {
			pn.pins[c] = &st
		}
	}
}
