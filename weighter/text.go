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

// Quantities, written for reading at a glance: three significant digits
// with an SI prefix (30.9 kB/s, 1.2k, 5m), never NaN or an exponent.
// Hand-written rather than a library's: go-humanize's SI writes decimals,
// not significant digits, and prints NaN; this is twenty lines.

// siPrefixes are the prefixes of the powers of 1000, from 10^-12 (index 0) to 10^18.
var siPrefixes = []string{"p", "n", "µ", "m", "", "k", "M", "G", "T", "P", "E"}

// siZero is the index of the empty prefix in siPrefixes.
const siZero = 4

// siParts writes v as a mantissa of 3 significant digits (trailing zeros
// dropped) and its SI prefix. Values from 0.01 to 1 keep no prefix (0.35,
// not 350m: a CPU share reads better so). ok is false for NaN and ±Inf.
func siParts(v float64) (mantissa, prefix string, ok bool) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "", "", false
	}
	if v == 0 {
		return "0", "", true
	}
	// Round first, so that 999.96 becomes 1000 and is written 1k, not 1e+03 or 1000.
	r, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'e', 2, 64), 64)
	exp := int(math.Floor(math.Log10(math.Abs(r))))
	group := int(math.Floor(float64(exp) / 3))
	if exp >= -2 && exp < 0 {
		group = 0
	}
	i := siZero + group
	if i < 0 || i >= len(siPrefixes) { // beyond p and E: no prefix can say it
		return strconv.FormatFloat(r, 'g', 3, 64), "", true
	}
	m := r / math.Pow(1000, float64(group))
	decimals := max(2-(exp-3*group), 0)
	s := strconv.FormatFloat(m, 'f', decimals, 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s, siPrefixes[i], true
}

// SIText writes v to 3 significant digits with its SI prefix and no unit
// (30.9k, 2.5, 0.35); "—" when v is NaN or infinite.
func SIText(v float64) string {
	m, p, ok := siParts(v)
	if !ok {
		return "—"
	}
	return m + p
}

// QuantityText writes a load in unit ("30.9 kB/s", "1.2k sessions"); with
// no unit known, the number alone ("30.9k"). A load that is NaN, infinite or
// negative is no valid reading: "no data".
func QuantityText(v float64, unit string) string {
	if v < 0 {
		return "no data"
	}
	m, p, ok := siParts(v)
	switch {
	case !ok:
		return "no data"
	case unit == "":
		return m + p
	}
	return m + " " + p + unit
}

// PinLines are the lines that say what a plan's pins write: one per pin
// set or cleared ("would pin …" in a dry run), then the pins kept or why
// none. Nil for a backend that does not pin.
func PinLines(p *PinPlan, dryRun bool) []string {
	if p == nil {
		return nil
	}
	var out []string
	for _, w := range p.Why {
		if dryRun {
			out = append(out, w.DryRun())
		} else {
			out = append(out, w.Reason)
		}
	}
	switch {
	case p.Reason != "" && p.Changes.Empty():
		out = append(out, fmt.Sprintf("pins: none written (%s)", p.Reason))
	case p.Reason != "":
		out = append(out, "pins: "+p.Reason)
	}
	if len(p.Pins) > 0 {
		out = append(out, fmt.Sprintf("pins: %d wanted (projected max/mean %s, %s with the clients where they sit)",
			len(p.Pins), shortRatio(p.Projected), shortRatio(p.Imbalance)))
	}
	return out
}
