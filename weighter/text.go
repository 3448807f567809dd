package weighter

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// The numbers an operator reads: once's table, the shed reasons and the
// status page write them with these, so that one value reads the same in each.

// RateText writes a rate with thousands separators: 3,100 (2 significant
// decimals below 10).
func RateText(r float64) string {
	if r < 10 {
		return strconv.FormatFloat(r, 'f', 2, 64)
	}
	digits := strconv.FormatFloat(math.Round(r), 'f', 0, 64)
	var b strings.Builder
	for i, d := range digits {
		if i > 0 && (len(digits)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(d)
	}
	return b.String()
}

// AgeText writes an age as whole seconds, minutes or hours and minutes: 45s, 14m, 2h5m.
func AgeText(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	}
	return fmt.Sprintf("%dh%dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
}

// LoadText writes a server's load in its source's unit, to 6 significant
// digits (loads range from CPU fractions to bytes per second); "-" for none.
func LoadText(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return strconv.FormatFloat(v, 'g', 6, 64)
}
