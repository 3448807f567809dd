package weighter

import (
	"cmp"
	"container/heap"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// A storm is most of a backend's client load losing its connections at
// once: an HAProxy restart, a network cut. Every one of those clients is
// about to connect again within seconds, and HAProxy places each by the
// lottery of the weights the daemon wrote for the loads before (or by the
// defaults a restarted HAProxy has): heavy clients land together, and the
// pins of the heavy ones alone were chosen against light clients that no
// longer sit where they did. In a storm the Pinner places every client it
// measured at the previous plan (the heaviest max_pins of them) from their
// last rates, heaviest first, each on the server with the least load
// projected so far (the load of the connections still open, measured, plus
// the clients placed before it): the whole placement is free once, since
// every one of them reconnects anyway. While they come back (the daemon
// cycles every 250 ms then), each cycle places again those still away
// against where the others landed (stormPlace). The light ones' pins are
// withdrawn by the usual rule, `forget` after the storm, once they have
// served.

// pinStormShare is the share of the load of the clients remembered at the
// previous plan (the heaviest max_pins) whose connections must have closed
// (or been replaced by new ones not measured yet) since, for the plan to be
// a storm. Half: a server's clients dropping (one server of two or more
// restarting) is not a storm, every client of an HAProxy dropping is.
const pinStormShare = 0.5

// knownClient is a client measured at the previous plan.
type knownClient struct {
	addr  string
	rate  float64
	conns int
}

// pinMemory is what the Pinner remembers of the clients between plans: the
// heaviest max_pins connected at the previous plan, and their load. A storm
// is told from those alone: of 100,000 clients the heaviest thousand carry
// the load that matters, and a restart takes them all.
type pinMemory struct {
	known map[string]knownClient
	total float64
}

// remember records the clients connected at this plan with their rates (at
// most limit, the heaviest): the rate measured now, or, for a client whose
// connections are all new (not measured yet), the one remembered from
// before. It returns the clients remembered at the previous plan that are
// not measured now (gone, or back on new connections), heaviest first, when
// they carried pinStormShare or more of the load remembered then; nil when
// this plan is no storm. Clients not listed (nil) forget everything: no
// storm can be told from them.
func (m *pinMemory) remember(clients []Client, limit int) []knownClient {
	if clients == nil {
		m.known, m.total = nil, 0
		return nil
	}
	// One pass over up to 100,000 clients, no map of them: the heaviest
	// `limit` in a heap, and which of those remembered are measured now.
	measured := make(map[string]bool, len(m.known))
	h := &knownHeap{}
	for _, c := range clients {
		if c.Addr == "" {
			continue
		}
		k := knownClient{addr: c.Addr, rate: c.Rate, conns: c.Conns}
		old, wasKnown := m.known[c.Addr]
		if k.rate > 0 && !isInf(k.rate) {
			if wasKnown {
				measured[c.Addr] = true
			}
		} else {
			if c.Conns == 0 || !wasKnown {
				continue
			}
			k.rate = old.rate // back on a new connection: as before
		}
		switch {
		case h.Len() < limit:
			heap.Push(h, k)
		case lighter((*h)[0], k):
			(*h)[0] = k
			heap.Fix(h, 0)
		}
	}
	var gone []knownClient
	for a, k := range m.known {
		if !measured[a] {
			gone = append(gone, k)
		}
	}
	slices.SortFunc(gone, func(a, b knownClient) int { // heaviest first; summed in one order
		return cmp.Or(cmp.Compare(b.rate, a.rate), strings.Compare(a.addr, b.addr))
	})
	goneLoad := 0.0
	for _, k := range gone {
		goneLoad += k.rate
	}
	storm := m.total > 0 && goneLoad >= pinStormShare*m.total
	// An address listed twice counts with its heaviest entry.
	m.known = make(map[string]knownClient, h.Len())
	for _, k := range *h {
		if old, dup := m.known[k.addr]; !dup || k.rate > old.rate {
			m.known[k.addr] = k
		}
	}
	kept := slices.SortedFunc(maps.Values(m.known), func(a, b knownClient) int { return strings.Compare(a.addr, b.addr) })
	m.total = 0
	for _, k := range kept { // summed in one order
		m.total += k.rate
	}
	if isInf(m.total) {
		m.known, m.total = nil, 0
	}
	if !storm {
		return nil
	}
	return gone
}

// clientsOf merges the entries of the addresses in want (a list may have
// several for one): its most connections and its highest rate.
func clientsOf(clients []Client, want map[string]bool) map[string]Client {
	out := make(map[string]Client, len(want))
	for _, c := range clients {
		if !want[c.Addr] {
			continue
		}
		old, ok := out[c.Addr]
		if !ok {
			out[c.Addr] = c
			continue
		}
		old.Conns = max(old.Conns, c.Conns)
		if finite(c.Rate) > finite(old.Rate) {
			old.Rate = c.Rate
		}
		out[c.Addr] = old
	}
	return out
}

// lighter orders known clients: the lighter first, then by address.
func lighter(a, b knownClient) bool {
	if a.rate != b.rate {
		return a.rate < b.rate
	}
	return a.addr > b.addr
}

// knownHeap is a min-heap of known clients, the lightest on top: the
// heaviest `limit` of 100,000 are kept in one pass.
type knownHeap []knownClient

func (h knownHeap) Len() int           { return len(h) }
func (h knownHeap) Less(i, j int) bool { return lighter(h[i], h[j]) }
func (h knownHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *knownHeap) Push(x any)        { *h = append(*h, x.(knownClient)) }
func (h *knownHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// pinStorm is a storm under way: the clients whose connections closed,
// heaviest first, and when the Pinner stops waiting for them.
type pinStorm struct {
	clients []knownClient
	until   time.Time
}

// pinStormFor bounds a storm: a client not back within it is placed by the
// rules outside a storm. A restarted HAProxy's clients are back within
// seconds.
const pinStormFor = 30 * time.Second

// pinStormDone: the storm is over once the clients still away carry less
// than this share of its load (the rest may never come back: a client that
// left for good looks the same as one on its way).
const pinStormDone = 0.1

// stormPlace pins the storm's clients that are not back yet, heaviest
// first, each to the pinnable server with the least projected load: what
// its open connections carry as measured now, the clients back but not
// measured yet (on their pin when it is in the table; else spread over the
// servers by their connections the socket table has not measured), and the
// clients placed before it. Every cycle of
// the storm places those still away again: the ones that came back before
// their pin was written sit where the weights put them, and the pins of the
// others make up for it. It returns false, having planned nothing, when
// every client of the storm is back.
//
// Pins of other clients stay as they are (written again when the table lost
// them) and come first within max_pins; a storm client left without a new
// pin (max_pins, the table's room, or a client of several connections
// heavier than a server's share of the storm, which the weights spread)
// keeps the pin it had while there is room, and loses it otherwise.
func (pn *Pinner) stormPlace(plan *PinPlan, began bool, in PinInput, bins []pinBin, index map[string]int,
	cur, foreign, inTable map[string]string, clearOne func(string, PinWhy), cleared map[string]bool) bool {
	want := make(map[string]bool, len(pn.storm.clients))
	for _, k := range pn.storm.clients {
		want[k.addr] = true
	}
	now := clientsOf(in.Clients, want)
	var away []knownClient
	// The clients back but not measured yet: one whose pin is in the
	// table came back to it (pinned); one without (back before its pin
	// was written) sits where the weights put it (back, spread below).
	back := 0.0
	type onPin struct {
		server string
		rate   float64
	}
	var pinned []onPin
	for _, k := range pn.storm.clients {
		switch c, ok := now[k.addr]; {
		case foreign[k.addr] != "":
			// Another balancer's pin (a shared table): it goes there.
			if !ok || c.Conns == 0 || !(c.Rate > 0) || isInf(c.Rate) {
				pinned = append(pinned, onPin{foreign[k.addr], k.rate})
			}
		case !ok || c.Conns == 0:
			away = append(away, k)
		case !(c.Rate > 0) || isInf(c.Rate):
			if s, ok := inTable[k.addr]; ok && !cleared[k.addr] {
				pinned = append(pinned, onPin{s, k.rate})
			} else {
				back += k.rate
			}
		}
	}
	stormLoad, awayLoad := 0.0, 0.0
	for _, k := range pn.storm.clients {
		stormLoad += k.rate
	}
	for _, k := range away {
		awayLoad += k.rate
	}
	if len(away) == 0 || awayLoad < pinStormDone*stormLoad {
		return false
	}

	var pool []int
	measured := make([]int, len(bins))
	for i := range bins {
		bins[i].proj = 0
		if bins[i].pinnable {
			pool = append(pool, i)
		}
	}
	for _, s := range in.Sessions {
		if i, ok := index[s.Server]; ok && s.Rate > 0 && !isInf(s.Rate) {
			// A client's rate counts the same on every server: a
			// server's calibration factor also carries the other
			// balancers' share, which a reconnecting client does not
			// add to.
			bins[i].proj += s.Rate
			measured[i]++
		}
	}
	// The clients back but not measured: on the servers whose connections
	// the socket table has not measured yet, in proportion; evenly when
	// HAProxy's counts do not tell.
	for _, p := range pinned {
		if i, ok := index[p.server]; ok {
			bins[i].proj += p.rate
			measured[i]++ // one of its connections not measured is this client's (or will be)
		}
	}
	fresh, freshSum := make([]float64, len(bins)), 0.0
	for _, sv := range in.Servers {
		if i, ok := index[sv.Name]; ok && sv.Conns > measured[i] {
			fresh[i] = float64(sv.Conns - measured[i])
			freshSum += fresh[i]
		}
	}
	for _, i := range pool {
		switch {
		case freshSum > 0:
			bins[i].proj += back * fresh[i] / freshSum
		case len(pool) > 0:
			bins[i].proj += back / float64(len(pool))
		}
	}
	share := awayLoad / float64(max(len(pool), 1))
	inStorm := make(map[string]bool, len(away))
	for _, k := range away {
		inStorm[k.addr] = true
	}

	// written: the pin is in the table as read and stays; otherwise it
	// takes a place of the table's room.
	room := pinRoom(in.Table, inTable, plan.Changes.Clear)
	written := func(c, server string) bool { s, ok := inTable[c]; return ok && s == server && !cleared[c] }
	inTableNow := func(c string) bool { _, ok := inTable[c]; return ok && !cleared[c] }
	var why []PinWhy
	take := func(p Pin, w PinWhy) bool {
		if len(plan.Pins) >= pn.p.MaxPins || !inTableNow(p.Client) && room <= 0 {
			return false
		}
		if !inTableNow(p.Client) {
			room--
		}
		plan.Pins = append(plan.Pins, p)
		if !written(p.Client, p.Server) {
			why = append(why, w)
		}
		return true
	}

	// The pins of the clients connected (or long gone) first.
	var kept []Pin
	for c, s := range cur {
		if !inStorm[c] {
			kept = append(kept, Pin{Client: c, Server: s})
		}
	}
	sortPins(kept)
	for _, p := range kept {
		if !take(p, PinWhy{Client: p.Client, To: p.Server, Reason: fmt.Sprintf("pin %s to %s again: the table lost it", p.Client, p.Server)}) && inTableNow(p.Client) {
			clearOne(p.Client, PinWhy{Client: p.Client, From: p.Server,
				Reason: fmt.Sprintf("clear the pin of %s on %s: beyond max_pins %d", p.Client, p.Server, pn.p.MaxPins)})
		}
	}

	h := &binHeap{bins: bins, pos: make([]int, len(bins))}
	for _, i := range pool {
		h.pos[i] = len(h.idx)
		h.idx = append(h.idx, i)
	}
	heap.Init(h)
	var left []knownClient
	for _, k := range away {
		if h.Len() == 0 || k.conns > 1 && k.rate > share && len(pool) > 1 {
			left = append(left, k) // many users behind one address: the weights spread it
			continue
		}
		// No min_gain here: a pin kept on a server a tenth above the
		// least loaded, client after client, left a restart at 1.19
		// max/mean on the bench (1.06-1.10 placed afresh every cycle, at
		// the price of a few pins rewritten a cycle while the storm lasts).
		to := h.idx[0]
		if !take(Pin{Client: k.addr, Server: bins[to].name}, PinWhy{Client: k.addr, Rate: k.rate, To: bins[to].name, Storm: true,
			Reason: fmt.Sprintf("pin %s (%s %s before its connections closed) to %s: clients reconnecting at once are placed heaviest first on the least loaded server",
				k.addr, RateText(k.rate), unitText(in.Unit), bins[to].name)}) {
			left = append(left, k)
			continue
		}
		plan.Storm++
		bins[to].proj += k.rate
		heap.Fix(h, h.pos[to])
	}
	for _, k := range left {
		s, ok := cur[k.addr]
		if !ok {
			continue
		}
		if !take(Pin{Client: k.addr, Server: s}, PinWhy{Client: k.addr, To: s, Reason: fmt.Sprintf("pin %s to %s again: the table lost it", k.addr, s)}) && inTableNow(k.addr) {
			clearOne(k.addr, PinWhy{Client: k.addr, From: s, Rate: k.rate,
				Reason: fmt.Sprintf("clear the pin of %s on %s: lighter than the %d heaviest (max_pins)", k.addr, s, pn.p.MaxPins)})
		}
	}

	plan.StormBegan = began
	plan.Reason = fmt.Sprintf("reconnect storm: %d clients not back yet pinned by their last rates", plan.Storm)
	if n := len(left); n > 0 {
		plan.Reason += fmt.Sprintf("; %d left to the weights (max_pins, the table's room, or several connections heavier than a server's share)", n)
	}
	sum, top := 0.0, 0.0
	for _, i := range pool {
		sum += bins[i].proj
		top = max(top, bins[i].proj)
	}
	if sum > 0 {
		plan.Projected = top / (sum / float64(len(pool)))
	}
	pn.finish(plan, plan.Changes.Clear, inTable, true, why)
	return true
}
