package weighter

import (
	"context"
	"fmt"
	"math"
	"time"
)

// LocalCounter is one server's fast local signal at one read: what this
// balancer has sent it and how many connections it held.
type LocalCounter struct {
	// Bytes is the cumulative bytes of the server's connections (the
	// direction the reader was asked for). Only its differences mean anything;
	// the Calibrator takes it as its counter.
	Bytes float64
	// Rate is Bytes' rate since the reader's previous read (bytes/s).
	Rate float64
	// Sessions is the mean number of open connections over the same span.
	Sessions float64
	// Reset: the reader has no earlier value for the server (its first read,
	// or the server is new): Rate means nothing yet.
	Reset bool
	// FreshRate and FreshSessions are the part of Rate and Sessions that
	// comes from connections with no rate of their own yet (opened since the
	// reader's previous read; 0 when the reader does not tell them apart). A
	// new connection has carried only what it carried since it opened,
	// maybe milliseconds, maybe its handshake alone: CombineFast leaves it
	// out of the load per connection while the server has other connections.
	FreshRate, FreshSessions float64
	// Unread, when not "", says why the reader could not read the server's
	// load at this read: it has no address the reader can see (a unix
	// socket), or HAProxy reports sessions on it that the reader found none
	// of. Its Rate and Sessions are then not a measure of it (0 B/s would
	// read as idle, and an idle server is raised): the server is missing
	// data, and keeps its share (policy missing). Bytes stays a counter that
	// never goes back, but is not fed to the calibration.
	Unread string
}

// Read reports whether the counter measures the server: it has a rate
// (not Reset) and the reader could read it (Unread empty).
func (c LocalCounter) Read() bool { return !c.Reset && c.Unread == "" }

// LocalRead is one read of a backend's fast local signal.
type LocalRead struct {
	// At is when HAProxy was read; Since the previous read's At (zero at the
	// first). A reader may return the same read again (At not newer) between
	// two reads of HAProxy.
	At, Since time.Time
	Servers   map[string]LocalCounter
	// Streams is how many streams the read went through (all proxies'), 0 when
	// the reader does not say: what the read costs HAProxy grows with it.
	Streams int
	// Skipped is how many streams of the read could not be read and were
	// left out (a layout the reader does not know, an HAProxy stream of its
	// own); SkipReason the first one's why. The rest of the read stands.
	Skipped    int
	SkipReason string
	// Age is how old the read was when returned.
	Age time.Duration
	// Dead is non-nil when the reader found the signal dead: connections
	// open on the servers and no byte of theirs moving for several reads.
	Dead error
	// Peers says, when the read adds other balancers' readings (peers), which
	// were added and which left out; "" without peers.
	Peers string
	// Counts: the reader counts connections, not bytes (IPVS): Rate is the
	// mean open connections over the span, Bytes the connection-seconds.
	Counts bool
	// Open are the connections open at the read, each with its own rate in
	// bytes/s over the same span (NaN when not measured), when the reader
	// lists them: what session shedding chooses from.
	Open []ShedSession
	// Clients are the backend's client source addresses with what each
	// sends (in the direction weighed by), when the reader lists them: what
	// pinning chooses the heavy clients from. nil when it does not.
	Clients []Client
	// Reader names what was read ("kernel", "sessions", …; "" when the
	// reader does not say): the plan's reason and the metrics name it, as a
	// reader with fallbacks may change from one read to the next.
	Reader string
}

// LocalReader reads the fast local signal of one backend (HAProxy's
// per-server byte counters and open sessions) for servers, each of which
// gets an entry (0 bytes when it carries no connection). servers are the
// cycle's read of the target, with their addresses and open sessions, which
// a reader of the socket table or of peers matches by. The haproxy package
// implements it; the weighter only combines what it reads.
type LocalReader interface {
	ReadLocal(ctx context.Context, servers []ServerState) (LocalRead, error)
}

// Bytes says which direction of a server's traffic is its fast load.
type Bytes string

// Byte directions.
const (
	BytesIn   Bytes = "in"   // client to server (requests, uploads, ingest)
	BytesOut  Bytes = "out"  // server to client (responses, downloads)
	BytesBoth Bytes = "both" // both: the calibration absorbs the servers' mix
)

// FastInput is what one server's load of a fast cycle was made of: its load
// is Factor × Local / max(Sessions, 1).
type FastInput struct {
	// Local is the server's byte rate over the last interval (bytes/s).
	Local float64 `json:"local"`
	// Sessions is its mean open sessions over the same interval, without
	// Fresh: the sessions of new connections, which have no rate yet and
	// count at the others' mean (LocalCounter.FreshSessions).
	Sessions float64 `json:"sessions"`
	Fresh    float64 `json:"fresh,omitempty"`
	// Factor is its calibration (1 when uncalibrated).
	Factor     float64 `json:"factor"`
	Calibrated bool    `json:"calibrated"`
	// Note says how the load was made, for the plan's reason.
	Note string `json:"note,omitempty"`
}

// CombineFast turns a read of the fast signal and each server's calibration
// into loads per connection now, x_i = c_i · local_i / max(sess_i, 1), one
// point per server at r.At: local_i is the server's byte rate since the
// reader's previous read and sess_i its mean open sessions over the same
// span. A server the reader has no rate for yet (Reset), could not read
// (Unread: never read as 0, which is idle), or whose inputs are not finite
// and not negative, gets no point (the Controller treats it as missing
// data). A server without a calibration gets factor 1. Pure.
func CombineFast(r LocalRead, cal map[string]Calibration) (Loads, map[string]FastInput) {
	loads := Loads{}
	inputs := map[string]FastInput{}
	for name, c := range r.Servers {
		if !c.Read() {
			continue
		}
		sess := c.Sessions
		if !validLoad(sess) {
			sess = 0
		}
		rate, fresh := withoutFresh(c, sess)
		sess -= fresh
		k, ok := cal[name]
		if !ok {
			k = Calibration{Factor: 1}
		}
		x := k.Apply(rate, sess) // NaN for a rate that is not finite and not negative
		if !validLoad(x) {
			continue
		}
		loads[name] = Series{{Time: r.At, Value: x}}
		inputs[name] = FastInput{Local: rate, Sessions: sess, Fresh: fresh, Factor: k.Factor, Calibrated: k.Calibrated, Note: k.Reason}
	}
	return loads, inputs
}

// withoutFresh returns a server's rate without its new connections' part
// (FreshRate), and the sessions left out with them, while it has other
// connections (sess > FreshSessions): the new ones then count at the mean
// load per connection of the others, not as idle ones, which is what an
// operator expects of a new client until it has shown otherwise (a server
// that gained a connection doubled its weight, 32 → 66, for a cycle). A
// server whose every connection is new has no mean to count them at: they
// count, their bytes over the span. Invalid fresh parts are ignored.
func withoutFresh(c LocalCounter, sess float64) (rate, fresh float64) {
	f, fr := c.FreshSessions, c.FreshRate
	if !(f > 0) || math.IsInf(f, 0) || !validLoad(fr) || !(sess > f) || !(fr <= c.Rate) {
		return c.Rate, 0
	}
	return c.Rate - fr, f
}

// fastNote is the plan reason's part that shows a server's fast inputs.
func fastNote(in FastInput, calibrate, counts bool) string {
	s := fmt.Sprintf("fast %s / %s sess", QuantityText(in.Local, "B/s"), SIText(max(in.Sessions, 1)))
	if in.Fresh > 0 {
		s += fmt.Sprintf(" (+%s new, at the mean)", SIText(in.Fresh))
	}
	if counts {
		s = fmt.Sprintf("fast %s connections", SIText(in.Sessions))
	}
	switch {
	case !calibrate:
		return s
	case in.Calibrated && in.Note != "":
		return fmt.Sprintf("%s × calibration %.3g (%s)", s, in.Factor, in.Note)
	case in.Calibrated:
		return fmt.Sprintf("%s × calibration %.3g", s, in.Factor)
	case in.Note != "":
		return fmt.Sprintf("%s; %s; fast signal alone", s, in.Note)
	}
	return s + "; fast signal alone"
}
