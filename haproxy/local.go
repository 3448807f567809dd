package haproxy

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// The fast local signal: per server, how many bytes this HAProxy has forwarded
// so far and how many streams were open, read from the live per-stream totals
// of `show sess all` (docs/research/fresh-by-default.md, docs/research/haproxy-stream-counters.md).
// It is what weighter.Calibrator.Local takes as its counters, and what
// weighter.Calibration.Apply takes as local load and sessions.

// LocalBoth counts the bytes of both directions (bytes_in + bytes_out).
const LocalBoth = "both"

// ErrLocalSignalDead: streams are open on the backend's servers but none of
// their byte totals has moved for several dumps. The per-stream totals are then
// not a signal: a build or mode in which they do not advance, traffic only in
// the other direction, or every connection idle (which looks the same, and
// carries no load to weigh by); weigh by the external source alone until bytes
// move again.
var ErrLocalSignalDead = errors.New("local signal dead: streams are open but their byte totals do not move")

// LocalQuery says what ReadLocal reports.
type LocalQuery struct {
	// Counter is the direction counted: CounterBytesIn (client → server, the
	// default when ""; the product's load is the data points clients send),
	// CounterBytesOut (server → client) or LocalBoth. The names are those of
	// the `source: haproxy` counters.
	Counter string
	// Servers are the backend's servers (as Servers read them): each gets an
	// entry, with 0 bytes when it never carried a stream. A server seen
	// carrying streams gets one too, named or not (one added since the
	// caller's list). A server is never forgotten by the Client, so one
	// removed and added again goes on from its count.
	Servers []string
	// Open asks for the list of open streams with their own rates
	// (StreamsReading.Open). Only session shedding chooses from it, and at
	// 10,000 streams it costs about 8 ms and 3 MB a read, so a backend that
	// does not shed leaves it out.
	Open bool
}

// Validate reports an unknown counter.
func (q LocalQuery) Validate() error {
	switch q.Counter {
	case "", CounterBytesIn, CounterBytesOut, LocalBoth:
		return nil
	}
	return fmt.Errorf("haproxy local signal: unknown counter %q (want %s, %s or %s)", q.Counter, CounterBytesIn, CounterBytesOut, LocalBoth)
}

// StreamsReading is one read of a backend's local signal: what the weighter
// takes (weighter.LocalRead, filled here rather than copied field by field
// by the caller) and what the caller needs of the dump besides.
//
// Between dumps (see LocalBudget) ReadLocal returns the newest dump's reading
// again, with its own (older) At: a rate taken between two readings' At stays
// exact, it only spans longer. weighter.Calibrator.Local ignores a reading
// whose At is not newer than the previous one.
//
// Of the weighter's LocalRead: At is the middle of the dump, which HAProxy
// writes stream by stream while it runs (~90 ms at 10,000 streams); Since the
// previous dump's At (zero at the first). Servers has an entry per server of
// the backend: Bytes is the cumulative count of the query's direction, every
// byte of the server's streams seen in a dump, each counted once, including
// those of streams that have since closed. It never decreases through one
// Client, across HAProxy restarts too; it starts at an arbitrary base (what
// the open streams had forwarded at the first dump), so only its differences
// mean anything. Bytes a stream forwarded after the last dump that saw it,
// and streams that opened and closed between two dumps, are not counted:
// right for connections that live many intervals (the product's clients), an
// undercount for short ones (HTTP requests of a few ms each are streams of
// their own and mostly never seen). Rate is Bytes' rate over (Since, At];
// Sessions the mean number of open streams over it (each stream open at the
// dump for the part of the span it was open, from its age; each gone since
// the previous dump for half the span; at the first dump, the streams open
// at it). Reset marks a server's first reading through this Client: a value
// read through another Client (before a reload built a new one) has another
// base. Streams is how many streams the whole HAProxy process had in the
// dump (every backend's, and the CLI's own): what the dump cost. Skipped
// streams could not be read (their bytes are not counted), SkipReason the
// first one's why; a dump with more unreadable streams than readable ones is
// an error instead. Dead wraps ErrLocalSignalDead when streams have been open
// on the backend's servers and no byte total of the counted direction has
// moved for LocalBudget.DeadAfter dumps in a row. Open lists the backend's
// streams open at the dump on a server, each with its own rate (what session
// shedding chooses from), when the query asked for them.
type StreamsReading struct {
	weighter.LocalRead
	// Next is the earliest time the next dump may be made (the budget).
	Next time.Time
	// OpenAt is how many streams were open on each server at the dump
	// (Sessions is their mean over the span).
	OpenAt map[string]int
}

// LocalBudget bounds what the `show sess all` dumps of one HAProxy process
// cost. A dump costs HAProxy ~5–9 µs of CPU per stream of the whole process,
// whatever backend asks (docs/research/haproxy-stream-counters.md): one dump serves
// every backend read through the same Client, and the next one is made no
// sooner than max(Share, streams × PerStream) after the previous one began.
type LocalBudget struct {
	// Share is how long a dump serves every backend before a new one is
	// made: the backends' cycles run at their own phases, and those within
	// Share of a dump use it rather than dump again. Default 1 s (half the
	// default interval, so that each 2 s cycle gets a dump of its own).
	Share time.Duration
	// PerStream spaces dumps by the size of the last one. The default 0.6 ms
	// per stream keeps HAProxy's CPU for dumping under ~1 % of a core: every
	// 2 s up to ~3,000 streams, every ~6 s at 10,000, every ~30 s at 50,000.
	PerStream time.Duration
	// DeadAfter is how many dumps in a row with streams open and no byte
	// total moving make the signal dead. Default 5 (10 s at 2 s).
	DeadAfter int
}

// DefaultLocalBudget is the budget a Client starts with.
var DefaultLocalBudget = LocalBudget{Share: time.Second, PerStream: 600 * time.Microsecond, DeadAfter: 5}

// ReadLocal returns the backend's local signal from the newest `show sess all`
// of the Client's HAProxy, dumping again when the budget allows (one dump
// serves every backend of the Client). An error means no dump could be read
// (unreachable, a malformed or cut dump, the context's deadline): the reader's
// counts are left as they were, and the next dump is tried no sooner than
// LocalBudget.Share after the failure (calls meanwhile get the same error), so
// an HAProxy in trouble is not asked for a dump by every backend. A dump the
// caller cancelled is not such a failure.
func (b *RuntimeBackend) ReadLocal(ctx context.Context, q LocalQuery) (StreamsReading, error) {
	if err := q.Validate(); err != nil {
		return StreamsReading{}, err
	}
	if err := checkName("backend", b.name); err != nil {
		return StreamsReading{}, err
	}
	st := &b.c.local
	st.mu.Lock()
	defer st.mu.Unlock()
	for {
		if st.busy != nil {
			// Another backend's call is dumping: its dump serves this one.
			busy := st.busy
			st.mu.Unlock()
			select {
			case <-busy:
			case <-ctx.Done():
				st.mu.Lock()
				return StreamsReading{}, fmt.Errorf("backend %s: local signal: waiting for the dump: %w", b.name, ctx.Err())
			}
			st.mu.Lock()
			continue
		}
		now := st.clock()
		if st.acc != nil && now.Before(st.next) {
			break
		}
		if st.failErr != nil && now.Sub(st.failed) < st.budgetOf().Share {
			return StreamsReading{}, fmt.Errorf("backend %s: local signal: %w", b.name, st.failErr)
		}
		busy := make(chan struct{})
		st.busy = busy
		st.mu.Unlock()
		d, err := b.c.localDump(ctx, st.clock)
		st.mu.Lock()
		st.busy = nil
		close(busy)
		if err != nil {
			// A caller that cancelled (a reload, shutdown) learnt nothing
			// about HAProxy: the next call dumps again.
			if !errors.Is(ctx.Err(), context.Canceled) {
				st.failed, st.failErr = st.clock(), err
			}
			return StreamsReading{}, fmt.Errorf("backend %s: local signal: %w", b.name, err)
		}
		st.failErr = nil
		if st.acc == nil {
			st.acc = newLocalAcc()
		}
		st.acc.apply(d.localDump)
		p := st.budgetOf()
		st.next = d.began.Add(max(p.Share, time.Duration(d.total)*p.PerStream))
		break
	}
	r := st.acc.reading(b.name, q, st.budgetOf().DeadAfter)
	r.Next = st.next
	r.Age = max(st.clock().Sub(r.At), 0)
	return r, nil
}

// localState is a Client's shared dump and what it has accumulated: one
// `show sess all` serves every backend read through the Client.
type localState struct {
	mu      sync.Mutex
	budget  LocalBudget
	now     func() time.Time // tests set it
	acc     *localAcc        // nil until the first dump
	busy    chan struct{}    // non-nil while a dump runs; closed when it ends
	next    time.Time        // no dump before this (the budget)
	failed  time.Time        // when the newest dump failed, if failErr
	failErr error
}

func (st *localState) clock() time.Time {
	if st.now != nil {
		return st.now()
	}
	return time.Now()
}

// budgetOf returns the budget with defaults for unset fields.
func (st *localState) budgetOf() LocalBudget {
	p := st.budget
	if p.Share <= 0 {
		p.Share = DefaultLocalBudget.Share
	}
	if p.PerStream <= 0 {
		p.PerStream = DefaultLocalBudget.PerStream
	}
	if p.DeadAfter <= 0 {
		p.DeadAfter = DefaultLocalBudget.DeadAfter
	}
	return p
}

// SetLocalBudget replaces the budget of the Client's dumps; zero fields keep
// their defaults. It applies from the next dump on.
func (c *Client) SetLocalBudget(p LocalBudget) {
	c.local.mu.Lock()
	defer c.local.mu.Unlock()
	c.local.budget = p
}

// timedDump is a localDump with when it began and how long it took.
type timedDump struct {
	localDump
	began time.Time
	took  time.Duration
}

// localDump reads one `show sess all` and keeps what the accumulation needs of
// each stream of a backend (the CLI's streams, and streams before a backend is
// chosen, are left out). It is stamped with the middle of the dump: HAProxy
// writes the streams one after the other while it runs.
func (c *Client) localDump(ctx context.Context, now func() time.Time) (timedDump, error) {
	var maxSerial uint64
	began := now()
	d, err := c.dumpSessions(ctx, "show sess all", func(s *Session) bool {
		maxSerial = max(maxSerial, s.Serial)
		return s.Frontend != cliFrontend && s.Backend != "" && !s.Internal
	})
	ended := now()
	if err != nil {
		return timedDump{}, fmt.Errorf("show sess all: %w", err)
	}
	out := timedDump{began: began, took: ended.Sub(began)}
	out.at = began.Add(out.took / 2)
	out.maxSerial, out.total = maxSerial, d.streams+d.skipped
	out.skipped, out.skipErr = d.skipped, d.skipErr
	out.streams = make([]dumpedStream, 0, len(d.sessions))
	for _, s := range d.sessions {
		// parseSessionHeader accepted only 0x and at most 16 hex digits.
		id, _ := strconv.ParseUint(s.ID[len("0x"):], 16, 64)
		out.streams = append(out.streams, dumpedStream{key: streamKey{id, s.Serial}, backend: s.Backend, server: s.Server,
			in: uint64(s.ReqBytes), out: uint64(s.ResBytes), age: s.Age, id: s.ID, client: s.Client})
	}
	return out, nil
}
