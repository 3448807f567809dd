package weighter

import (
	"math"
	"time"
)

// ewmaState is one server's smoothed load and when it was last updated.
type ewmaState struct {
	value float64
	at    time.Time
}

// smoothLoads returns the loads to weight with: the raw loads when smoothing is
// off, else each server's EWMA with half-life p.Smoothing (time-based, so an
// irregular cycle does not change the weighting). A raw load above
// PanicThreshold × mean bypasses the EWMA at once (Knative's panic window): a
// server going hot must be relieved now, not in a few half-lives. Missing data
// leaves the state alone and stays missing.
func (c *Controller) smoothLoads(now time.Time, raw []float64, mems []memory) []float64 {
	if c.p.Smoothing <= 0 {
		return raw
	}
	var valid []float64
	for _, x := range raw {
		if !math.IsNaN(x) {
			valid = append(valid, x)
		}
	}
	m := mean(valid)
	out := make([]float64, len(raw))
	for i := range raw {
		out[i] = raw[i]
		if math.IsNaN(raw[i]) {
			continue
		}
		h := mems[i].hist()
		st := h.smooth
		panicking := c.p.PanicThreshold > 0 && raw[i] > c.p.PanicThreshold*m
		if st.at.IsZero() || panicking || now.Before(st.at) {
			st = ewmaState{value: raw[i], at: now}
		} else {
			alpha := 1 - math.Exp2(-float64(now.Sub(st.at))/float64(c.p.Smoothing))
			st = ewmaState{value: st.value + alpha*(raw[i]-st.value), at: now}
		}
		h.smooth = st
		out[i] = st.value
	}
	return out
}
