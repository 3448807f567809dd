package weighter

import (
	"math"
	"slices"
	"time"
)

var aggregateNames = []string{AggregateLast, AggregateAvg, AggregateMax, AggregateMedian}

// Aggregate reduces one server's series to one load with the named method
// (last, avg, max, median). Points that are NaN, ±Inf or negative are ignored.
// With maxAge > 0, points older than now-maxAge are ignored too, so a series
// whose newest valid point is older counts as missing. The result is NaN when
// no valid point is left, or the method is unknown.
func Aggregate(s Series, method string, now time.Time, maxAge time.Duration) float64 {
	vals, newest := validPoints(s, now, maxAge)
	if len(vals) == 0 {
		return math.NaN()
	}
	switch method {
	case AggregateLast:
		return newest
	case AggregateAvg:
		return mean(vals)
	case AggregateMax:
		return slices.Max(vals)
	case AggregateMedian:
		return median(vals)
	}
	return math.NaN()
}

// validPoints returns the valid, fresh values of s and the newest one of them
// (by time; on equal times the later in the series wins).
func validPoints(s Series, now time.Time, maxAge time.Duration) (vals []float64, newest float64) {
	var newestAt time.Time
	for _, pt := range s {
		if !validLoad(pt.Value) || (maxAge > 0 && now.Sub(pt.Time) > maxAge) {
			continue
		}
		if len(vals) == 0 || !pt.Time.Before(newestAt) {
			newest, newestAt = pt.Value, pt.Time
		}
		vals = append(vals, pt.Value)
	}
	return vals, newest
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

func median(vals []float64) float64 {
	s := slices.Clone(vals)
	slices.Sort(s)
	mid := len(s) / 2
	if len(s)%2 == 1 {
		return s[mid]
	}
	return s[mid-1]/2 + s[mid]/2
}
