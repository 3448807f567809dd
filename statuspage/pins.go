package statuspage

import (
	"cmp"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// The page's pinned clients: per backend that pins, the last plan's pins
// (heaviest first, at most maxPinRows), each with the client's rate, the
// server it is pinned to, where it was seen when pinned and why (the
// History remembers the line of the cycle that set it: a pin in place has
// none in later plans), the pins the plan withdrew, and the table's state.

// maxPinRows bounds the pins (and the withdrawals) the page lists: a
// backend may pin a thousand clients; the heaviest say what matters.
const maxPinRows = 50

// Clients are what the newest socket table read learnt of a pinning
// backend's clients: Open connections, the client addresses Tracked (each
// with its rate) and those Untracked, beyond the bound (never pinned).
type Clients struct {
	Open, Tracked, Untracked int
}

// pinMemo is the line of the cycle that set a pin in force, and when.
type pinMemo struct {
	why weighter.PinWhy
	at  time.Time
}

// recordPins remembers the line of each pin set by c, and forgets the
// clients no longer pinned (the memory is bounded by the plan's pins:
// max_pins). A cycle without a pin plan (a failed read) changes nothing.
// Called with h.mu held.
func (h *History) recordPins(c Cycle) {
	p := c.Plan.Pins
	if p == nil {
		return
	}
	if h.pins == nil {
		h.pins = map[string]pinMemo{}
	}
	for _, w := range p.Why {
		if w.To != "" {
			h.pins[w.Client] = pinMemo{why: w, at: c.End}
		}
	}
	pinned := make(map[string]bool, len(p.Pins))
	for _, pin := range p.Pins {
		pinned[pin.Client] = true
	}
	for client := range h.pins {
		if !pinned[client] {
			delete(h.pins, client)
		}
	}
}

// pinMemos returns the remembered lines of clients.
func (h *History) pinMemos(pins []weighter.Pin) map[string]pinMemo {
	out := make(map[string]pinMemo, len(pins))
	if h == nil {
		return out
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, p := range pins {
		if m, ok := h.pins[p.Client]; ok {
			out[p.Client] = m
		}
	}
	return out
}

// pinsView is a backend's pinning as the page shows it.
type pinsView struct {
	DryRun    bool
	Table     string // the stick table's name
	State     string // ok, missing, full, error
	Err       string // the table read's error
	Reason    string // why nothing (more) is set, or what held it back
	Count     int    // pins in force (in a dry run: wanted)
	Set, Clrd int    // written by the plan's cycle (in a dry run: wanted)
	Imbalance string // max/mean with the pinned clients where they sit; "" undefined
	Projected string // with them where the plan pins them
	Clients   *Clients
	Rows      []pinRowView
	More      int // pins beyond maxPinRows
	Cleared   []string
	MoreClr   int
}

type pinRowView struct {
	Client, Rate, Exact, Server, Seen, Since, Why string
}

// pinsOf is the plan cycle's pinning as the page shows it; nil for a backend
// that does not pin.
func pinsOf(now time.Time, c weighter.Cycle, h *History, clients *Clients) *pinsView {
	p := c.Plan.Pins
	if p == nil {
		return nil
	}
	v := &pinsView{DryRun: !c.Applied, Table: p.Table, State: p.TableState(), Err: p.TableErr, Reason: p.Reason, Count: len(p.Pins),
		Set: len(p.Changes.Set), Clrd: len(p.Changes.Clear), Clients: clients}
	if validImbalance(p.Imbalance) {
		v.Imbalance = ratioText(p.Imbalance)
	}
	if validImbalance(p.Projected) {
		v.Projected = ratioText(p.Projected)
	}
	rates := clientRates(p.Pins, c.Signal)
	memos := h.pinMemos(p.Pins)
	pins := slices.Clone(p.Pins)
	slices.SortFunc(pins, func(a, b weighter.Pin) int {
		return cmp.Or(cmp.Compare(rates[b.Client], rates[a.Client]), strings.Compare(a.Client, b.Client))
	})
	for _, pin := range pins[:min(len(pins), maxPinRows)] {
		row := pinRowView{Client: pin.Client, Server: pin.Server, Rate: "—", Seen: "—", Since: "—"}
		if r, ok := rates[pin.Client]; ok && r >= 0 {
			row.Rate, row.Exact = weighter.QuantityText(r, weighter.ShedUnit), weighter.LoadText(r)
		}
		if m, ok := memos[pin.Client]; ok && m.why.To == pin.Server {
			row.Seen = cmp.Or(m.why.From, "unknown")
			row.Since = ago(now, m.at)
			row.Why = m.why.Reason
			if v.DryRun {
				row.Why = m.why.DryRun()
			}
		}
		v.Rows = append(v.Rows, row)
	}
	v.More = len(pins) - len(v.Rows)
	for _, w := range p.Why {
		if w.To != "" {
			continue
		}
		if len(v.Cleared) == maxPinRows {
			v.MoreClr++
			continue
		}
		if v.DryRun {
			v.Cleared = append(v.Cleared, w.DryRun())
		} else {
			v.Cleared = append(v.Cleared, w.Reason)
		}
	}
	return v
}

// clientRates are the pinned clients' rates in sig's read (the heaviest
// entry of an address, as the Pinner takes it); a client not listed or not
// measured has none.
func clientRates(pins []weighter.Pin, sig *weighter.Signal) map[string]float64 {
	out := make(map[string]float64, len(pins))
	if sig == nil || len(pins) == 0 {
		return out
	}
	pinned := make(map[string]bool, len(pins))
	for _, p := range pins {
		pinned[p.Client] = true
	}
	for _, cl := range sig.Clients {
		if !pinned[cl.Addr] || !(cl.Rate >= 0) || math.IsInf(cl.Rate, 0) {
			continue
		}
		if r, ok := out[cl.Addr]; !ok || cl.Rate > r {
			out[cl.Addr] = cl.Rate
		}
	}
	return out
}
