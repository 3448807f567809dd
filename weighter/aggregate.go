package weighter

import (
	"math"
	"slices"
	"time"
)

var aggregateNames = []string{AggregateLast, AggregateAvg, AggregateMax, AggregateMedian}

// Aggregate reduces one server's series (oldest first) to one load with the
// named method: last (the newest valid point, the leading edge), avg, max,
// median. Points that are NaN, ±Inf or negative are ignored.
// With maxAge > 0, points older than now-maxAge are ignored too, so a series
// whose newest valid point is older counts as missing. The result is NaN when
// no valid point is left, or the method is unknown.
func Aggregate(s Series, method string, now time.Time, maxAge time.Duration) float64 {
	v, _ := aggregate(s, method, now, maxAge, nil)
	return v
}

// aggregate is Aggregate without allocation: last scans back from the newest
// point (Series is oldest first) and stops at the first valid one; the others
// make one pass, and only median collects the values, into scratch, which it
// returns for reuse.
func aggregate(s Series, method string, now time.Time, maxAge time.Duration, scratch []float64) (float64, []float64) {
	// A point is fresh when now - time <= maxAge, i.e. time >= cutoff: one
	// comparison per point instead of a subtraction (this runs for every
	// point of every server each cycle).
	cutoff := now.Add(-maxAge)
	fresh := func(pt Point) bool { return validLoad(pt.Value) && (maxAge <= 0 || !pt.Time.Before(cutoff)) }
	if method == AggregateLast {
		for i := len(s) - 1; i >= 0; i-- {
			if validLoad(s[i].Value) {
				if !fresh(s[i]) {
					break
				}
				return s[i].Value, scratch
			}
		}
		return math.NaN(), scratch
	}
	var n int
	var top, sum float64
	for _, pt := range s {
		if !fresh(pt) {
			continue
		}
		n++
		top, sum = max(top, pt.Value), sum+pt.Value
		if method == AggregateMedian {
			scratch = append(scratch, pt.Value)
		}
	}
	switch {
	case n == 0:
		return math.NaN(), scratch
	case method == AggregateAvg && math.IsInf(sum, 1):
		return meanScaled(s, fresh, n), scratch
	case method == AggregateAvg:
		return sum / float64(n), scratch
	case method == AggregateMax:
		return top, scratch
	case method == AggregateMedian:
		return median(scratch), scratch
	}
	return math.NaN(), scratch
}

// meanScaled is the mean of the n fresh points of s when their sum overflows.
func meanScaled(s Series, fresh func(Point) bool, n int) float64 {
	sum := 0.0
	for _, pt := range s {
		if fresh(pt) {
			sum += pt.Value / float64(n)
		}
	}
	return sum
}

// mean of finite values ≥ 0 that cannot overflow to +Inf.
func mean(vals []float64) float64 {
	if len(vals) == 0 {
		return math.NaN()
	}
	sum := 0.0
	for _, v := range vals {
		sum += v
	}
	n := float64(len(vals))
	if !math.IsInf(sum, 0) {
		return sum / n
	}
	sum = 0
	for _, v := range vals {
		sum += v / n
	}
	return sum
}

// median sorts vals in place.
func median(s []float64) float64 {
	slices.Sort(s)
	mid := len(s) / 2
	if len(s)%2 == 1 {
		return s[mid]
	}
	return s[mid-1]/2 + s[mid]/2
}
