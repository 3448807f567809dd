package sources

import (
	"strings"
	"time"

	"github.com/prometheus/common/model"
)

// PromQLWindow returns the largest range of the query's range selectors and
// subqueries (`rate(x[1m])` → 1m, `max_over_time(rate(x[30s])[5m:15s])` →
// 5m): the span the query's value at a time averages over, as well as a
// query can say it. ok is false when the query has none (a gauge, a recording
// rule that hides its rate) or a range is not a duration (a Grafana variable).
// Brackets inside string literals (a regex matcher) are not ranges.
func PromQLWindow(query string) (time.Duration, bool) {
	var largest time.Duration
	for i := 0; i < len(query); i++ {
		switch c := query[i]; c {
		case '"', '\'', '`':
			i = skipString(query, i)
		case '[':
			end := strings.IndexByte(query[i:], ']')
			if end < 0 {
				return largest, largest > 0
			}
			rng, _, _ := strings.Cut(query[i+1:i+end], ":")
			d, err := model.ParseDuration(strings.TrimSpace(rng))
			if err != nil {
				return 0, false
			}
			largest = max(largest, time.Duration(d))
			i += end
		}
	}
	return largest, largest > 0
}

// skipString returns the index of the quote that closes the string starting
// at i (the end of s when it is not closed); backslashes escape in "…" and '…'.
func skipString(s string, i int) int {
	q := s[i]
	for j := i + 1; j < len(s); j++ {
		switch {
		case s[j] == '\\' && q != '`':
			j++
		case s[j] == q:
			return j
		}
	}
	return len(s)
}
