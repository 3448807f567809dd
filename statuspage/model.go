package statuspage

import (
	"math"
	"strconv"
	"strings"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// What the status page draws, as values the template only places: a bar
// per server of its load against the backend's mean, the sparkline of the
// imbalance, the loads' unit and the reasons said once.

// Colours of a server's bar by its load / mean: the docs call a server hot
// from 1.5 × the mean (what shedding brings whales under; docs/shedding.md);
// warm is the band an operator watches before that.
const (
	hotRatio  = 1.5
	warmRatio = 1.2
)

// barWidth is a bar's full width in CSS pixels (the template's too).
const barWidth = 200

// barView is one server's bar: Fill pixels of load, a marker at Mean pixels.
type barView struct {
	Fill, Mean int
	Class      string // ok, warm, hot; none without data
	ratio      float64
}

// barsOf draws every server's load on one scale per backend: the mean sits at
// the middle (the scale is twice the mean), unless a server is more than twice
// the mean, when the scale is its load and the mean moves left.
func barsOf(servers []weighter.ServerPlan) []barView {
	mean, top := meanLoad(servers)
	bars := make([]barView, len(servers))
	scale := max(2*mean, top)
	for i, s := range servers {
		if !validLoad(s.Load) || !(scale > 0) {
			bars[i] = barView{Class: "none", ratio: math.NaN()}
			continue
		}
		b := barView{ratio: s.Load / mean, Mean: int(math.Round(mean / scale * barWidth)),
			Fill: int(math.Round(s.Load / scale * barWidth))}
		switch {
		case b.ratio >= hotRatio:
			b.Class = "hot"
		case b.ratio >= warmRatio:
			b.Class = "warm"
		default:
			b.Class = "ok"
		}
		bars[i] = b
	}
	return bars
}

// meanLoad is the mean and the highest of the valid loads of the servers the
// engine weighs (as the plan's imbalance is); of every server with a valid
// load when none is weighed.
func meanLoad(servers []weighter.ServerPlan) (mean, top float64) {
	for _, weighedOnly := range []bool{true, false} {
		sum, n := 0.0, 0
		top = 0
		for _, s := range servers {
			if !validLoad(s.Load) || (weighedOnly && s.Action == weighter.ActionSkip) {
				continue
			}
			sum, n, top = sum+s.Load, n+1, max(top, s.Load)
		}
		if n > 0 {
			return sum / float64(n), top
		}
	}
	return math.NaN(), math.NaN()
}

// The sparkline's box in SVG user units: historySlots points, sparkStep apart.
const (
	sparkStep   = 3
	sparkWidth  = historySlots * sparkStep
	sparkHeight = 40
	sparkPad    = 3 // keeps the line's stroke inside the box at the top and bottom
)

// sparkView is the imbalance over the history's span as SVG polylines (one
// per run of slots with data: a gap is a gap, not a line across it).
type sparkView struct {
	Lines         []string // each a polyline's points attribute
	Top           string   // the imbalance at the top of the box ("2×"); the bottom is 1×
	Peak          string   // the highest over the span; "" when no slot has data
	HotY          int      // the hot threshold's height, for its dashed line; -1 when above Top
	Hot           string   // the hot threshold, "1.5×"
	Width, Height int
}

// sparkOf draws worst, oldest first (NaN: no data), from 1× at the bottom
// to the next half above its peak (at least 2×) at the top.
func sparkOf(worst []float64) sparkView {
	v := sparkView{Width: sparkWidth, Height: sparkHeight, HotY: -1, Hot: strconv.FormatFloat(hotRatio, 'g', 3, 64) + "×"}
	peak := math.NaN()
	for _, w := range worst {
		if !(w <= peak) && !math.IsNaN(w) {
			peak = w
		}
	}
	top := 2.0
	if !math.IsNaN(peak) {
		v.Peak = ratioText(peak)
		top = max(top, math.Ceil(peak*2)/2)
	}
	v.Top = strconv.FormatFloat(top, 'g', 3, 64) + "×"
	y := func(r float64) float64 {
		inner := float64(sparkHeight - 2*sparkPad)
		return sparkPad + inner*(1-(min(max(r, 1), top)-1)/(top-1))
	}
	if hotRatio <= top {
		v.HotY = int(math.Round(y(hotRatio)))
	}
	var line []string
	flush := func() {
		if len(line) == 1 { // one point draws nothing: make it a short dash
			line = append(line, line[0])
			x, _, _ := strings.Cut(line[0], ",")
			n, _ := strconv.ParseFloat(x, 64)
			line[0] = strconv.FormatFloat(n-1, 'f', 1, 64) + line[0][len(x):]
		}
		if len(line) > 0 {
			v.Lines = append(v.Lines, strings.Join(line, " "))
		}
		line = nil
	}
	for i, w := range worst {
		if math.IsNaN(w) {
			flush()
			continue
		}
		x := float64(i*sparkStep) + sparkStep/2.0
		line = append(line, strconv.FormatFloat(x, 'f', 1, 64)+","+strconv.FormatFloat(y(w), 'f', 1, 64))
	}
	flush()
	return v
}

// sharedReason splits the servers' reasons into what every server's says
// (its "; "-separated parts common to all, in the first server's order), to
// be written once, and what is each server's own. A reason alone (one
// server) stays the server's.
func sharedReason(reasons []string) (shared string, own []string) {
	own = append([]string(nil), reasons...)
	if len(reasons) < 2 {
		return "", own
	}
	parts := make([][]string, len(reasons))
	for i, r := range reasons {
		if r != "" {
			parts[i] = strings.Split(r, "; ")
		}
	}
	var common []string
	for _, p := range parts[0] {
		inAll := true
		for _, other := range parts[1:] {
			if !contains(other, p) {
				inAll = false
				break
			}
		}
		if inAll && !contains(common, p) {
			common = append(common, p)
		}
	}
	if len(common) == 0 {
		return "", own
	}
	for i, p := range parts {
		var rest []string
		for _, part := range p {
			if !contains(common, part) {
				rest = append(rest, part)
			}
		}
		own[i] = strings.Join(rest, "; ")
	}
	return strings.Join(common, "; "), own
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// loadUnit is the unit of a backend's loads as far as the daemon knows it.
type loadUnit struct {
	symbol  string // after the number and its prefix ("B/s"); "" when unknown
	header  string // the load column's header says it so
	perConn bool   // each load is per open connection (what leastconn weighs), not the server's
}

// unknownUnit: a Prometheus query or a Graphite target answers in its own
// unit, which the configuration does not say.
var unknownUnit = loadUnit{header: "in the source's unit"}

// loadUnit is the unit of the loads of a cycle whose signal was sig (nil:
// none, or the unit weighs without the fast signal). HAProxy's fast signal
// alone weighs bytes per second per connection; calibrated, it is in the
// source's unit (the calibration maps one onto the other); the source's
// unit is known only when its kind says it (Loads.Unit).
func (u Loads) loadUnit(sig *weighter.Signal) loadUnit {
	if sig != nil && sig.Pipeline == weighter.PipelineFast {
		if u.Fast == FastIPVS { // IPVS counts connections
			return unknownUnit
		}
		return loadUnit{symbol: "B/s", header: "B/s per connection", perConn: true}
	}
	if sig != nil && sig.Pipeline == weighter.PipelineCalibrated {
		// The fast signal's bytes per connection, mapped onto the source's
		// unit: still a load per connection, not the server's.
		return loadUnit{header: "per connection, in the source's unit", perConn: true}
	}
	if u.Unit == nil {
		return unknownUnit
	}
	return loadUnit{symbol: u.Unit.Symbol, header: u.Unit.Header, perConn: u.Unit.PerConnection}
}

// loadText says what the loads are made of: the source, and whether
// HAProxy's fast signal carries them, with its state.
func (u Loads) loadText(sig *weighter.Signal) string {
	kind := u.Source
	if kind == "" {
		kind = "the source"
	}
	if u.Fast == FastNone {
		if u.FastOff != "" {
			return kind + " alone (fast signal off: " + u.FastOff + ")"
		}
		return kind
	}
	fast := "HAProxy's fast signal"
	if u.Fast == FastIPVS {
		fast = "IPVS connection counts"
	}
	if sig == nil {
		return fast + ", with " + kind + " (not read yet)"
	}
	state := " (fast signal " + string(sig.Fast)
	if sig.FastReason != "" {
		state += ": " + sig.FastReason
	}
	state += ")"
	switch sig.Pipeline {
	case weighter.PipelineCalibrated:
		return fast + " × calibration by " + kind + state
	case weighter.PipelineFast:
		return fast + " alone, " + kind + " the fallback" + state
	}
	return kind + " alone" + state
}
