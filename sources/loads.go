package sources

import (
	"log/slog"
	"math"
	"slices"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// rawSeries is one series as the monitoring system named it, before name mapping.
type rawSeries struct {
	name   string
	points weighter.Series
}

// assemble maps raw series to servers. Problems of one server never fail the
// others: a series the rules cannot place is dropped (not ours), two series for
// one server or a series without one valid point leave that server out (the
// weighter then treats it as having no data) and are logged as warnings.
// Series names are redacted in logs: a target may echo an API key.
func assemble(log *slog.Logger, red *redactor, rules *nameRules, raw []rawSeries) weighter.Loads {
	loads := weighter.Loads{}
	from := map[string]string{}
	dup := map[string]bool{}
	for _, r := range raw {
		server, ok := rules.server(r.name)
		if !ok {
			log.Debug("series ignored: no server name", "series", red.String(r.name))
			continue
		}
		if prev, seen := from[server]; seen {
			log.Warn("server left out: duplicate series", "server", red.String(server), "series", red.String(r.name), "other", red.String(prev))
			dup[server] = true
			continue
		}
		from[server] = r.name
		loads[server] = validPoints(r.points)
	}
	for server, s := range loads {
		if dup[server] {
			delete(loads, server)
		} else if len(s) == 0 {
			log.Warn("server left out: no valid point (null, NaN, Inf or negative)", "server", red.String(server), "series", red.String(from[server]))
			delete(loads, server)
		}
	}
	return loads
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
