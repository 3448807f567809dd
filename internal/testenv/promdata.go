package testenv

import (
	"fmt"
	"strings"
	"time"
)

// PromData is OpenMetrics text for StartPrometheus to backfill: series
// sampled every step from a start, grouped in families (OpenMetrics wants a
// family's series together, after its # TYPE line). Build it with
// PromHour or PromSamples, then Type and the series of that type:
//
//	testenv.PromHour(time.Now(), 15*time.Second).
//		Type("weighter_load", "gauge").
//		Constant("weighter_load", `server="s1"`, 10).
//		String()
type PromData struct {
	start time.Time
	step  time.Duration
	n     int
	b     strings.Builder
}

// PromHour is PromData for an hour of samples every step around now: from
// 30 minutes before now's minute to 30 minutes after, so that an instant
// query at any moment of a test, and a range over the minutes before it,
// sees data.
func PromHour(now time.Time, step time.Duration) *PromData {
	return PromSamples(now.Truncate(time.Minute).Add(-30*time.Minute), step, int(time.Hour/step)+1)
}

// PromSamples is PromData for n samples every step from start: a Prometheus
// backfilled with it has no point before start, as one that has not
// scraped the servers yet.
func PromSamples(start time.Time, step time.Duration, n int) *PromData {
	return &PromData{start: start, step: step, n: n}
}

// Type starts the family of typ ("gauge", "counter"); a counter family is
// named without its series' _total suffix.
func (d *PromData) Type(family, typ string) *PromData {
	fmt.Fprintf(&d.b, "# TYPE %s %s\n", family, typ)
	return d
}

// Series adds the series name{labels}, labels as OpenMetrics writes them
// (server="s1",shard="a"), whose sample i is value(i).
func (d *PromData) Series(name, labels string, value func(i int) float64) *PromData {
	for i := range d.n {
		fmt.Fprintf(&d.b, "%s{%s} %v %d\n", name, labels, value(i), d.start.Add(time.Duration(i)*d.step).Unix())
	}
	return d
}

// Constant adds a series at v in every sample (a gauge; NaN is written as
// Prometheus reads it).
func (d *PromData) Constant(name, labels string, v float64) *PromData {
	return d.Series(name, labels, func(int) float64 { return v })
}

// Rate adds a counter series at 0 in the first sample, growing by
// perSecond a second: rate() over any window of it returns perSecond.
func (d *PromData) Rate(name, labels string, perSecond float64) *PromData {
	return d.Series(name, labels, func(i int) float64 { return float64(i) * d.step.Seconds() * perSecond })
}

// String is the OpenMetrics text, ended by its # EOF line.
func (d *PromData) String() string { return d.b.String() + "# EOF\n" }
