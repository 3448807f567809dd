package statuspage

import (
	"math"
	"sync"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// The status page's memory of a backend: its imbalance and sheds over the
// last historySpan, kept in historySlots fixed buckets so that it costs the
// same whatever the interval (100 ms to minutes) and however long the daemon
// runs. A bucket keeps the worst imbalance of its cycles: at 3 a.m. a spike
// matters more than an average that hides it.

const (
	historySpan  = 15 * time.Minute
	historySlot  = 10 * time.Second
	historySlots = int(historySpan / historySlot)
)

// historyBucket is one historySlot of a backend's cycles.
type historyBucket struct {
	slot  int64   // which historySlot since the epoch the bucket holds; 0 = empty
	worst float64 // the highest imbalance (max/mean load) of its plans; NaN when none had one
	sheds map[string]int
}

// History is a backend's ring of buckets. It outlives reloads (the
// daemon hands it to the runner a reload starts) and is fed once per cycle by the
// daemon's runner (Record); the page reads it. Safe for concurrent use.
type History struct {
	mu      sync.Mutex
	buckets [historySlots]historyBucket
	pins    map[string]pinMemo // client → the line that set its pin in force (pins.go)
}

// NewHistory is an empty history.
func NewHistory() *History { return &History{} }

// slotOf is the historySlot t falls in.
func slotOf(t time.Time) int64 { return t.UnixNano() / int64(historySlot) }

// Record adds one ended cycle: its plan's imbalance, when it has one, the
// sessions it shed (in a dry run, would have shed), per server, and why
// each pin it set was set.
func (h *History) Record(c Cycle) {
	if h == nil || c.End.IsZero() {
		return
	}
	slot := slotOf(c.End)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recordPins(c)
	b := &h.buckets[int(slot%int64(historySlots))]
	if b.slot != slot {
		*b = historyBucket{slot: slot, worst: math.NaN()}
	}
	if c.Planned() && validImbalance(c.Plan.Imbalance) && !(c.Plan.Imbalance <= b.worst) {
		b.worst = c.Plan.Imbalance
	}
	for server, n := range shedCounts(c.Cycle) {
		if b.sheds == nil {
			b.sheds = map[string]int{}
		}
		b.sheds[server] += n
	}
}

// validImbalance: a plan's imbalance is 0 when undefined (no server with data).
func validImbalance(v float64) bool { return v > 0 && !math.IsInf(v, 0) }

// shedCounts are the sessions a cycle closed per server, or in a dry run
// planned to close (a dry run closes none, and the page says "would").
func shedCounts(c weighter.Cycle) map[string]int {
	out := map[string]int{}
	if !c.Applied {
		if c.Plan.Shed != nil {
			for _, s := range c.Plan.Shed.Sheds {
				out[s.Session.Server]++
			}
		}
		return out
	}
	for _, r := range c.Sheds {
		if r.Outcome == weighter.ShedClosed {
			out[r.Session.Server]++
		}
	}
	return out
}

// historyView is the last historySpan up to now: Worst has historySlots
// values, oldest first, NaN where no cycle had an imbalance; Sheds are the
// sessions shed per server over the span.
type historyView struct {
	Worst []float64
	Sheds map[string]int
}

// view returns the span that ends with now's bucket.
func (h *History) view(now time.Time) historyView {
	v := historyView{Worst: make([]float64, historySlots), Sheds: map[string]int{}}
	if h == nil {
		for i := range v.Worst {
			v.Worst[i] = math.NaN()
		}
		return v
	}
	last := slotOf(now)
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := range historySlots {
		slot := last - int64(historySlots-1-i)
		v.Worst[i] = math.NaN()
		b := &h.buckets[int(((slot%int64(historySlots))+int64(historySlots))%int64(historySlots))]
		if b.slot != slot || slot <= 0 {
			continue
		}
		v.Worst[i] = b.worst
		for server, n := range b.sheds {
			v.Sheds[server] += n
		}
	}
	return v
}
