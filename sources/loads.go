package sources

import (
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/common/model"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// rawSeries is one series as the monitoring system named it, before name mapping.
type rawSeries struct {
	name   string
	points weighter.Series
	// labels are the series' labels (Prometheus); nil where a series has only
	// its name (Graphite). They tell two series for one server apart.
	labels model.Metric
}

// Why a server was left out of the loads.
const (
	leftDuplicate = "duplicate series"
	leftNoValid   = "no valid point (null, NaN, Inf or negative)"
)

// shownServers bounds the servers logged one by one, with their detail, in
// one fetch when they are left out; the others are counted in one line.
const shownServers = 5

// assembler maps raw series to servers. Problems of one server never fail the
// others: a series the rules cannot place is dropped (not ours), two series for
// one server or a series without one valid point leave that server out (the
// weighter then treats it as having no data) and are logged as warnings.
// A source fetches every interval, for months: a server is logged when it is
// left out and when it is back, not at every fetch. Series names are redacted
// in logs: a target may echo an API key.
type assembler struct {
	log   *slog.Logger
	red   *redactor
	rules *nameRules

	mu   sync.Mutex
	left map[string]string // server → why it was left out when last logged
}

func newAssembler(log *slog.Logger, red *redactor, rules *nameRules) *assembler {
	return &assembler{log: log, red: red, rules: rules, left: map[string]string{}}
}

// assemble maps raw to loads and logs the servers whose problems began or ended.
func (a *assembler) assemble(raw []rawSeries) weighter.Loads {
	loads := weighter.Loads{}
	from := map[string]int{}        // server → index in raw of its series
	differ := map[string]string{}   // server with two series → how the first two differ
	problems := map[string]string{} // server → why it is left out at this fetch
	for i, r := range raw {
		server, ok := a.rules.server(r.name)
		if !ok {
			a.log.Debug("series ignored", "series", a.red.String(r.name), "reason", "no server name")
			continue
		}
		if prev, seen := from[server]; seen {
			if _, told := differ[server]; !told {
				differ[server] = a.red.String(difference(raw[prev], r))
			}
			problems[server] = leftDuplicate
			continue
		}
		from[server] = i
		loads[server] = validPoints(r.points)
	}
	for server, s := range loads {
		if problems[server] == leftDuplicate {
			delete(loads, server)
		} else if len(s) == 0 {
			problems[server] = leftNoValid
			delete(loads, server)
		}
	}
	a.report(problems, loads, func(server string) []any {
		if problems[server] == leftDuplicate {
			return []any{"differ", differ[server]}
		}
		return []any{"series", a.red.String(raw[from[server]].name)}
	})
	return loads
}

// report logs the servers newly left out (the first shownServers with their
// detail, the rest counted) and, in one line, those back in the loads.
func (a *assembler) report(problems map[string]string, loads weighter.Loads, detail func(server string) []any) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var fresh, back []string
	for _, server := range slices.Sorted(maps.Keys(problems)) {
		if a.left[server] != problems[server] {
			fresh = append(fresh, server)
			a.left[server] = problems[server]
		}
	}
	for _, server := range slices.Sorted(maps.Keys(a.left)) {
		if _, still := problems[server]; still {
			continue
		}
		// A server with no series at all any more is forgotten quietly:
		// the weighter reports missing data itself.
		delete(a.left, server)
		if _, ok := loads[server]; ok {
			back = append(back, server)
		}
	}
	for i, server := range fresh {
		attrs := append([]any{"server", a.red.String(server), "reason", problems[server]}, detail(server)...)
		if i < shownServers {
			a.log.Warn("server left out", attrs...)
		} else {
			a.log.Debug("server left out", attrs...)
		}
	}
	if n := len(fresh) - shownServers; n > 0 {
		a.log.Warn("more servers left out", "servers", n, "effect", "each logged at debug only")
	}
	if len(back) > 0 {
		a.log.Info("servers back in", "reason", "their series are valid again", "servers", len(back), "names", a.redactAll(back[:min(len(back), 10)]))
	}
}

func (a *assembler) redactAll(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = a.red.String(n)
	}
	return out
}

// difference says how two series named for one server differ: the labels
// whose values differ (a second exporter, job or instance), or the two names
// where series have no labels (Graphite targets).
func difference(a, b rawSeries) string {
	if a.labels == nil && b.labels == nil {
		return fmt.Sprintf("%q vs %q", a.name, b.name)
	}
	keys := map[model.LabelName]bool{}
	for k := range a.labels {
		keys[k] = true
	}
	for k := range b.labels {
		keys[k] = true
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		va, oka := a.labels[k]
		vb, okb := b.labels[k]
		if va == vb && oka == okb {
			continue
		}
		out = append(out, fmt.Sprintf("%s: %s vs %s", k, labelValue(va, oka), labelValue(vb, okb)))
	}
	if len(out) == 0 {
		return "same labels"
	}
	return strings.Join(out, ", ")
}

func labelValue(v model.LabelValue, ok bool) string {
	if !ok {
		return "(none)"
	}
	return fmt.Sprintf("%q", string(v))
}

// validPoints drops nulls (NaN), infinities and negative values, which no
// weighting can use (the weighter ignores them too; here they are logged), and
// puts the rest oldest first, as weighter.Series promises: the weighter takes
// the last point for the newest, and a server may send them in any order.
func validPoints(in weighter.Series) weighter.Series {
	out := make(weighter.Series, 0, len(in))
	for _, p := range in {
		if !math.IsNaN(p.Value) && !math.IsInf(p.Value, 0) && p.Value >= 0 {
			out = append(out, p)
		}
	}
	if !slices.IsSortedFunc(out, byTime) {
		slices.SortStableFunc(out, byTime)
	}
	return out
}

func byTime(a, b weighter.Point) int { return a.Time.Compare(b.Time) }
