package weighter

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestAggregate(t *testing.T) {
	now := t0
	at := func(ago time.Duration, v float64) Point { return Point{Time: now.Add(-ago), Value: v} }
	s := Series{at(40*time.Second, 4), at(30*time.Second, nan), at(20*time.Second, 1), at(10*time.Second, 7), at(0, -1)}
	tests := []struct {
		name   string
		series Series
		method string
		maxAge time.Duration
		want   float64
	}{
		{"last skips invalid newest", s, "last", time.Minute, 7},
		{"avg of valid", s, "avg", time.Minute, 4},
		{"max", s, "max", time.Minute, 7},
		{"median odd", s, "median", time.Minute, 4},
		{"median even", Series{at(3, 1), at(2, 2), at(1, 8), at(0, 4)}, "median", 0, 3},
		{"avg only fresh points", s, "avg", 25 * time.Second, 4},
		{"max age excludes old points", s, "max", 15 * time.Second, 7},
		{"newest valid too old", s, "last", 5 * time.Second, nan},
		{"max age 0 = no limit", Series{at(24*time.Hour, 3)}, "last", 0, 3},
		{"equal times: later wins", Series{at(0, 9), at(0, 2)}, "last", 0, 2},
		{"last: newest valid is stale", Series{at(0, nan), at(time.Hour, 3)}, "last", time.Minute, nan},
		{"only invalid", Series{at(0, nan), at(0, inf), at(0, math.Inf(-1)), at(0, -3)}, "avg", 0, nan},
		{"empty", nil, "last", 0, nan},
		{"unknown method", s, "p99", 0, nan},
		{"avg no overflow", Series{at(1, math.MaxFloat64), at(0, math.MaxFloat64)}, "avg", 0, math.MaxFloat64},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Aggregate(tc.series, tc.method, now, tc.maxAge)
			if math.IsNaN(tc.want) {
				assert.True(t, math.IsNaN(got), "got %v", got)
				return
			}
			assert.Equal(t, tc.want, got)
		})
	}
}
