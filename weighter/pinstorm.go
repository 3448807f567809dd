package weighter

import (
	"cmp"
	"container/heap"
	"fmt"
	"slices"
	"strings"
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
// every one of them reconnects anyway. The light ones' pins are withdrawn
// by the usual rule, `forget` after the storm, once they have served.

// pinStormShare is the share of the client load measured at the previous
// plan whose connections must have closed (or been replaced by new ones not
// measured yet) since, for the plan to be a storm. Half: a server's clients
// dropping (one server of two or more restarting) is not a storm, every
// client of an HAProxy dropping is.
const pinStormShare = 0.5

// knownClient is a client measured at the previous plan.
type knownClient struct {
	addr  string
	rate  float64
	conns int
}

// pinMemory is what the Pinner remembers of the clients between plans: the
// heaviest measured at the previous plan, and the whole load measured then.
type pinMemory struct {
	known map[string]knownClient
	total float64
}

// remember records the clients measured at this plan (at most limit, the
// heaviest) and returns the ones measured at the previous plan that are not
// measured now, heaviest first, when they carried pinStormShare or more of
// the load measured then; nil when this plan is no storm. Clients not
// listed (nil) forget everything: no storm can be told from them.
func (m *pinMemory) remember(clients []Client, limit int) []knownClient {
	if clients == nil {
		m.known, m.total = nil, 0
		return nil
	}
	measured := make(map[string]bool, len(clients))
	total := 0.0
	h := &knownHeap{}
	for _, c := range clients {
		if c.Addr == "" || !(c.Rate > 0) || isInf(c.Rate) {
			continue
		}
		measured[c.Addr] = true
		total += c.Rate
		k := knownClient{addr: c.Addr, rate: c.Rate, conns: c.Conns}
		switch {
		case h.Len() < limit:
			heap.Push(h, k)
		case lighter((*h)[0], k):
			(*h)[0] = k
			heap.Fix(h, 0)
		}
	}
	var gone []knownClient
	goneLoad := 0.0
	for a, k := range m.known {
		if !measured[a] {
			gone = append(gone, k)
			goneLoad += k.rate
		}
	}
	storm := m.total > 0 && !isInf(total) && goneLoad >= pinStormShare*m.total
	m.known = make(map[string]knownClient, h.Len())
	for _, k := range *h {
		if _, dup := m.known[k.addr]; !dup || k.rate > m.known[k.addr].rate {
			m.known[k.addr] = k
		}
	}
	m.total = total
	if !storm {
		return nil
	}
	slices.SortFunc(gone, func(a, b knownClient) int {
		return cmp.Or(cmp.Compare(b.rate, a.rate), strings.Compare(a.addr, b.addr))
	})
	return gone
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

// stormPlace pins the storm's clients, heaviest first, each to the pinnable
// server with the least projected load: the load its open, measured
// connections carry now (sessions) plus the clients placed before it.
// Pins of other clients stay as they are (written again when the table lost
// them) and come first within max_pins; a storm client left without a new
// pin (max_pins, the table's room, or a client of several connections
// heavier than a server's share of the storm, which the weights spread)
// keeps the pin it had while there is room, and loses it otherwise.
func (pn *Pinner) stormPlace(plan *PinPlan, storm []knownClient, bins []pinBin, sessions []ShedSession, index map[string]int,
	cur, inTable map[string]string, clearOne func(string, PinWhy), cleared map[string]bool, table PinTable, unit string) {
	var pool []int
	for i := range bins {
		bins[i].proj = 0
		if bins[i].pinnable {
			pool = append(pool, i)
		}
	}
	for _, s := range sessions {
		if i, ok := index[s.Server]; ok && s.Rate > 0 && !isInf(s.Rate) {
			bins[i].proj += s.Rate
		}
	}
	total := 0.0
	for _, k := range storm {
		total += k.rate
	}
	share := total / float64(max(len(pool), 1))
	inStorm := make(map[string]bool, len(storm))
	for _, k := range storm {
		inStorm[k.addr] = true
	}

	// written: the pin is in the table as read and stays; otherwise it
	// takes a place of the table's room.
	room := pinRoom(table, inTable, plan.Changes.Clear)
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

	// The pins of the clients still connected (or long gone) first.
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
	for _, k := range storm {
		if h.Len() == 0 || k.conns > 1 && k.rate > share && len(pool) > 1 {
			left = append(left, k) // many users behind one address: the weights spread it
			continue
		}
		to := h.idx[0]
		if !take(Pin{Client: k.addr, Server: bins[to].name}, PinWhy{Client: k.addr, Rate: k.rate, To: bins[to].name, Storm: true,
			Reason: fmt.Sprintf("pin %s (%s %s before its connections closed) to %s: clients reconnecting at once are placed heaviest first on the least loaded server",
				k.addr, RateText(k.rate), unitText(unit), bins[to].name)}) {
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

	plan.Reason = fmt.Sprintf("%d clients reconnecting at once (their connections closed since the last cycle) pinned by their last rates", plan.Storm)
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
}
