package haproxy

import (
	"cmp"
	"math"
	"slices"
	"strings"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// open lists the streams of backend that the newest dump listed on a
// server, by ID then Serial, as session shedding takes them: what names
// each (ID and Serial, for ShutdownStream), where it is, and its own rate.
// That rate is the growth of its total of the query's direction between the
// dump before and this one, in bytes per second: exact for a stream both
// dumps listed, whatever it did in between. NaN for a stream the dump
// before did not list (opened since, or the first dump): its total covers a
// span not known here, and a lifetime average (total/age) is not its rate
// now. span is the seconds between the dump before and the newest one (0
// at the first).
func (a *localAcc) open(backend, counter string, span float64) []weighter.ShedSession {
	var out []weighter.ShedSession
	for key, rec := range a.streams {
		if rec.seen != a.dumps || rec.backend != backend || rec.server == "" {
			continue
		}
		s := weighter.ShedSession{ID: rec.id, Serial: key.serial, Server: rec.server, Client: rec.client, Age: rec.age, Rate: math.NaN()}
		if rec.rated && span > 0 {
			var b uint64
			switch counter {
			case CounterBytesOut:
				b = rec.spanOut
			case LocalBoth:
				b = rec.spanIn + rec.spanOut
			default:
				b = rec.spanIn
			}
			s.Rate = float64(b) / span
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(x, y weighter.ShedSession) int {
		if c := strings.Compare(x.ID, y.ID); c != 0 {
			return c
		}
		return cmp.Compare(x.Serial, y.Serial)
	})
	return out
}
