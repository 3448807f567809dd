package haproxy

import (
	"fmt"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// How the per-server byte counters are built from `show sess all` dumps.
//
// A server's counter is the sum, over every stream seen on it, of the stream's
// newest byte total: when a dump lists a stream, the growth of its total since
// the dump before is added; when a stream is no longer listed, what was counted
// of it stays. So a byte is counted once, in the dump that first shows it, and
// a closed stream's bytes are not lost. Streams are matched across dumps by
// (ID, Serial): HAProxy gives a freed stream's address to the next one at once,
// so an ID alone can name a new stream whose total starts again from 0.
//
// Why not `show stat`'s bin plus the open streams' totals, which adds up to
// every byte exactly: that holds only without `option contstats`. With it,
// bin already holds part of each open stream's bytes (flushed every ~5 s) and
// the sum counts them twice, by an amount the socket cannot tell; HAProxy's
// configuration cannot be read over the socket, so whether contstats is on is
// not known either. The per-stream sum does not depend on contstats at all.
// Its cost: the bytes a stream forwards after the last dump that lists it, and
// streams that open and close between two dumps, are not counted. The
// product's clients hold their connections for many intervals, so this is a
// small share of the bytes, and the same share on every server; the
// calibration (a ratio normalised across servers) takes out what remains.

// streamKey names one stream for good: its address and its serial.
type streamKey struct{ id, serial uint64 }

// dumpedStream is what the accumulation needs of one stream of a dump.
type dumpedStream struct {
	key             streamKey
	backend, server string // server "" while HAProxy has not chosen one
	in, out         uint64 // req and res totals
	age             time.Duration
	id, client      string // as HAProxy prints them (Session.ID, Session.Client)
}

// localDump is one parsed `show sess all`.
type localDump struct {
	at        time.Time      // when HAProxy was read
	streams   []dumpedStream // streams of backends (no CLI stream)
	maxSerial uint64         // the newest serial in the dump, the CLI's own included
	total     int            // every stream of the process, as the dump listed them
	skipped   int            // streams that could not be read
	skipErr   error          // why the first of them could not
}

// localRetain is how many dumps a stream not listed is remembered for. HAProxy
// lists every stream that exists for the whole dump, so one missing has ended
// (a torn stream has too); remembering it a little longer costs little and
// keeps a stream that reappears from being counted again from 0.
const localRetain = 3

// localStream is what is remembered of one stream.
type localStream struct {
	backend, server string // where its counted bytes went; "" server: none counted yet
	in, out         uint64 // its totals as counted so far
	seen            uint64 // the number of the last dump that listed it
	// What the newest dump that listed it says of it, for its own rate:
	// the bytes counted at that dump, and whether the dump before listed it
	// too (else the bytes are since it opened, over no known span).
	spanIn, spanOut uint64
	rated           bool
	id, client      string
	age             time.Duration
}

// localServer is one server's accumulated signal.
type localServer struct {
	in, out       uint64  // cumulative bytes counted
	spanIn        uint64  // bytes counted at the newest dump (its span)
	spanOut       uint64  //
	open          int     // streams open at the newest dump
	sessionSpan   float64 // stream-seconds over the newest dump's span
	reportedSince bool    // a reading has reported this server
}

// localBackend is one backend's accumulated signal.
type localBackend struct {
	servers map[string]*localServer
	open    int // streams open on its servers at the newest dump
	// still counts the dumps in a row with streams open and no total of the
	// direction moving: [0] in, [1] out, [2] either; stillFrom is when the
	// first of them was read.
	still     [3]int
	stillFrom [3]time.Time
}

func (b *localBackend) server(name string) *localServer {
	s := b.servers[name]
	if s == nil {
		s = &localServer{}
		b.servers[name] = s
	}
	return s
}

// localAcc accumulates dumps. It does no I/O; the caller serialises calls.
type localAcc struct {
	dumps     uint64 // dumps applied
	at, since time.Time
	maxSerial uint64
	restarted bool // the newest dump is of another HAProxy process
	total     int
	skipped   int
	skipErr   error
	streams   map[streamKey]*localStream
	backends  map[string]*localBackend
}

func newLocalAcc() *localAcc {
	return &localAcc{streams: map[streamKey]*localStream{}, backends: map[string]*localBackend{}}
}

func (a *localAcc) backend(name string) *localBackend {
	b := a.backends[name]
	if b == nil {
		b = &localBackend{servers: map[string]*localServer{}}
		a.backends[name] = b
	}
	return b
}

// apply adds one dump, read after every dump applied before.
func (a *localAcc) apply(d localDump) {
	a.dumps++
	span := a.startDump(d)
	for _, ds := range d.streams {
		a.countStream(ds, span)
	}
	a.endStreams(span)
	a.noteStillness(span)
}

// startDump takes d's process, time and counts, and resets each server's
// per-span sums; it returns the span since the dump before (0 at the first,
// or when d is not newer).
func (a *localAcc) startDump(d localDump) time.Duration {
	n := a.dumps
	// HAProxy numbers streams from a process-wide counter, and every dump
	// holds the CLI's own stream, newer than any stream of the dump before:
	// a newest serial that went back is a new process. Its streams can take
	// an old stream's address and serial; forget the old ones. Unless a
	// stream goes on: the counter is 32 bits and wraps on a busy HAProxy
	// (every ~5 days at 10,000 streams/s) while the streams opened before
	// it go on, and counted again from 0 they would count twice.
	a.restarted = n > 1 && d.maxSerial < a.maxSerial && !a.carriesOn(d)
	if a.restarted {
		clear(a.streams)
	}
	a.maxSerial = d.maxSerial
	var span time.Duration
	if n > 1 && d.at.After(a.at) {
		span = d.at.Sub(a.at)
	}
	a.since, a.at, a.total = a.at, d.at, d.total
	a.skipped, a.skipErr = d.skipped, d.skipErr
	if n == 1 {
		a.since = time.Time{}
	}
	for _, b := range a.backends {
		b.open = 0
		for _, s := range b.servers {
			s.spanIn, s.spanOut, s.open, s.sessionSpan = 0, 0, 0, 0
		}
	}
	return span
}

// countStream adds what one listed stream forwarded since the dump before
// to its server's totals and span, and the part of the span it was open.
func (a *localAcc) countStream(ds dumpedStream, span time.Duration) {
	n := a.dumps
	rec := a.streams[ds.key]
	if rec == nil {
		rec = &localStream{}
		a.streams[ds.key] = rec
	}
	listedBefore := rec.seen == n-1 && rec.server != ""
	rec.seen = n
	if ds.server == "" {
		rec.rated = false
		return // no server yet: its bytes count once one is chosen
	}
	var dIn, dOut uint64
	if ds.in >= rec.in && ds.out >= rec.out {
		dIn, dOut = ds.in-rec.in, ds.out-rec.out
	} else {
		// A total went back: not the stream counted before (a new
		// process's stream with an old key). Count it from 0.
		dIn, dOut, listedBefore = ds.in, ds.out, false
	}
	rec.backend, rec.server, rec.in, rec.out = ds.backend, ds.server, ds.in, ds.out
	rec.spanIn, rec.spanOut, rec.rated = dIn, dOut, listedBefore && span > 0
	rec.id, rec.client, rec.age = ds.id, ds.client, ds.age
	b := a.backend(ds.backend)
	s := b.server(ds.server)
	s.in += dIn
	s.out += dOut
	s.spanIn += dIn
	s.spanOut += dOut
	s.open++
	b.open++
	if span > 0 {
		// Open over the whole span if the dump before listed it, else
		// since it was accepted.
		open := span
		if !listedBefore && ds.age < span {
			open = max(ds.age, 0)
		}
		s.sessionSpan += open.Seconds()
	}
}

// endStreams counts the streams the dump before listed and this one did not
// as open for half the span (they ended during it, on average half-way), and
// forgets streams unseen for localRetain dumps.
func (a *localAcc) endStreams(span time.Duration) {
	n := a.dumps
	for key, rec := range a.streams {
		if rec.seen == n-1 && rec.server != "" && span > 0 {
			a.backend(rec.backend).server(rec.server).sessionSpan += span.Seconds() / 2
		}
		if rec.seen+localRetain < n {
			delete(a.streams, key)
		}
	}
}

// noteStillness adds the span's open time to each server's total and counts,
// per backend and direction, the dumps in a row in which streams were open
// and no byte moved: what tells a dead signal (ErrLocalSignalDead).
func (a *localAcc) noteStillness(span time.Duration) {
	for _, b := range a.backends {
		var moved [3]bool
		for _, s := range b.servers {
			moved[0] = moved[0] || s.spanIn > 0
			moved[1] = moved[1] || s.spanOut > 0
			moved[2] = moved[2] || s.spanIn+s.spanOut > 0
		}
		for i := range b.still {
			switch {
			case b.open == 0 || moved[i] || span == 0:
				b.still[i] = 0
			case b.still[i] == 0:
				b.still[i], b.stillFrom[i] = 1, a.since
			default:
				b.still[i]++
			}
		}
	}
}

// carriesOn reports whether d lists a stream the dumps before listed, its
// totals not gone back: the same process.
func (a *localAcc) carriesOn(d localDump) bool {
	for _, ds := range d.streams {
		if rec := a.streams[ds.key]; rec != nil && ds.in >= rec.in && ds.out >= rec.out {
			return true
		}
	}
	return false
}

// counterIndex maps a query's counter to the index of localBackend.still.
func counterIndex(counter string) int {
	switch counter {
	case CounterBytesOut:
		return 1
	case LocalBoth:
		return 2
	}
	return 0
}

// reading returns backend's signal as of the newest dump, for q. Servers
// reported for the first time have Reset set.
func (a *localAcc) reading(backend string, q LocalQuery, deadAfter int) StreamsReading {
	r := StreamsReading{LocalRead: weighter.LocalRead{At: a.at, Since: a.since, Streams: a.total, Skipped: a.skipped}}
	if a.skipErr != nil {
		r.SkipReason = a.skipErr.Error()
	}
	b := a.backend(backend)
	for _, name := range q.Servers {
		b.server(name)
	}
	r.Servers = make(map[string]weighter.LocalCounter, len(b.servers))
	r.OpenAt = make(map[string]int, len(b.servers))
	span := a.at.Sub(a.since).Seconds()
	if a.since.IsZero() {
		span = 0
	}
	for name, s := range b.servers {
		sl := weighter.LocalCounter{Reset: !s.reportedSince}
		r.OpenAt[name] = s.open
		s.reportedSince = true
		var bytes, spanBytes uint64
		switch q.Counter {
		case CounterBytesOut:
			bytes, spanBytes = s.out, s.spanOut
		case LocalBoth:
			bytes, spanBytes = s.in+s.out, s.spanIn+s.spanOut
		default:
			bytes, spanBytes = s.in, s.spanIn
		}
		sl.Bytes = float64(bytes)
		if span > 0 {
			sl.Sessions = s.sessionSpan / span
			if !sl.Reset {
				sl.Rate = float64(spanBytes) / span
			}
		} else {
			sl.Sessions = float64(s.open)
		}
		r.Servers[name] = sl
	}
	if q.Open {
		r.Open = a.open(backend, q.Counter, span)
	}
	i := counterIndex(q.Counter)
	if deadAfter > 0 && b.still[i] >= deadAfter {
		dir := q.Counter
		if dir == "" {
			dir = CounterBytesIn
		}
		r.Dead = fmt.Errorf("%w: backend %s: %d streams open, no %s total moved over the last %d dumps (%s)",
			ErrLocalSignalDead, backend, b.open, dir, b.still[i], a.at.Sub(b.stillFrom[i]).Round(time.Millisecond))
	}
	return r
}
