package haproxy

import (
	"cmp"
	"math"
	"slices"
	"strings"
	"time"
)

// OpenStream is one stream open on a server of the backend at a dump, as
// session shedding needs it: what names it (ID and Serial, for
// ShutdownStream), where it is, and its own rate.
type OpenStream struct {
	ID     string
	Serial uint64
	Server string
	// Client is the source address as HAProxy prints it (Session.Client).
	Client string
	// Age is how long it had been open at the dump.
	Age time.Duration
	// Rate is the growth of its total of the query's direction between the
	// dump before and this one, in bytes per second: exact for a stream both
	// dumps listed, whatever it did in between. NaN for a stream the dump
	// before did not list (opened since, or the first dump): its total
	// covers a span not known here, and a lifetime average (total/age) is
	// not its rate now.
	Rate float64
}

// open lists the streams of backend that the newest dump listed on a
// server, by ID then Serial. span is the seconds between the dump before
// and the newest one (0 at the first).
func (a *localAcc) open(backend, counter string, span float64) []OpenStream {
	var out []OpenStream
	for key, rec := range a.streams {
		if rec.seen != a.dumps || rec.backend != backend || rec.server == "" {
			continue
		}
		s := OpenStream{ID: rec.id, Serial: key.serial, Server: rec.server, Client: rec.client, Age: rec.age, Rate: math.NaN()}
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
	slices.SortFunc(out, func(x, y OpenStream) int {
		if c := strings.Compare(x.ID, y.ID); c != 0 {
			return c
		}
		return cmp.Compare(x.Serial, y.Serial)
	})
	return out
}
