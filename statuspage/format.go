package statuspage

import (
	"math"
	"strconv"
)

// The status page's numbers: weighter.QuantityText and SIText (three
// significant digits with an SI prefix), and ratios. The exact value goes in
// the cell's title for whoever needs it.

// ratioText writes a load relative to a mean, as "1.62×"; "—" when undefined.
func ratioText(r float64) string {
	if !(r >= 0) || math.IsInf(r, 0) {
		return "—"
	}
	return strconv.FormatFloat(r, 'f', 2, 64) + "×"
}
