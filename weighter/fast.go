package weighter

import (
	"context"
	"fmt"
	"math"
	"time"
)

// LocalCounter is one server's fast local signal at one read: what this
// balancer has sent it so far and how many connections it holds.
type LocalCounter struct {
	// BytesIn and BytesOut are cumulative bytes of the server's connections,
	// client to server and server to client: those of closed connections plus
	// the open streams' totals so far. Only their differences between two reads
	// are used, so any origin does; a value lower than the previous read's
	// (HAProxy reloaded) restarts the server's rate.
	BytesIn, BytesOut float64
	// Sessions is the server's open connections at the read.
	Sessions float64
}

// LocalRead is one read of a backend's fast local signal.
type LocalRead struct {
	At      time.Time
	Servers map[string]LocalCounter
	// Streams is how many streams the read went through (all proxies'), 0 when
	// the reader does not say: what the read costs HAProxy grows with it.
	Streams int
}

// LocalReader reads the fast local signal of one backend (HAProxy's
// per-server byte counters and open sessions). The haproxy package implements
// it; the weighter only combines what it reads.
type LocalReader interface {
	ReadLocal(ctx context.Context) (LocalRead, error)
}

// Bytes says which direction of a server's traffic is its fast load.
type Bytes string

// Byte directions.
const (
	BytesIn   Bytes = "in"   // client to server (requests, uploads, ingest)
	BytesOut  Bytes = "out"  // server to client (responses, downloads)
	BytesBoth Bytes = "both" // both: the calibration absorbs the servers' mix
)

// Of returns the counter of c in direction d.
func (d Bytes) Of(c LocalCounter) float64 {
	switch d {
	case BytesIn:
		return c.BytesIn
	case BytesOut:
		return c.BytesOut
	}
	return c.BytesIn + c.BytesOut
}

// FastInput is what one server's load of a fast cycle was made of: its load
// is Factor × Local / max(Sessions, 1).
type FastInput struct {
	// Local is the server's byte rate over the last interval (bytes/s).
	Local float64 `json:"local"`
	// Sessions is its mean open sessions over the same interval.
	Sessions float64 `json:"sessions"`
	// Factor is its calibration (1 when uncalibrated).
	Factor     float64 `json:"factor"`
	Calibrated bool    `json:"calibrated"`
	// Note says how the load was made, for the plan's reason.
	Note string `json:"note,omitempty"`
}

// CombineFast turns two reads of the fast signal and each server's
// calibration into loads per connection now, x_i = c_i · local_i /
// max(sess_i, 1), one point per server at cur.At. local_i is the server's
// byte rate between the reads and sess_i the mean of its open sessions at
// both. A server missing from either read, whose counter went backwards, or
// whose inputs are not finite gets no point (the Controller treats it as
// missing data). A server without a calibration gets factor 1. Pure.
func CombineFast(prev, cur LocalRead, dir Bytes, cal map[string]Calibration) (Loads, map[string]FastInput) {
	loads := Loads{}
	inputs := map[string]FastInput{}
	dt := cur.At.Sub(prev.At).Seconds()
	if !(dt > 0) {
		return loads, inputs
	}
	for name, c := range cur.Servers {
		p, ok := prev.Servers[name]
		if !ok {
			continue
		}
		delta := dir.Of(c) - dir.Of(p)
		if !(delta >= 0) || math.IsInf(delta, 0) {
			continue // counter reset, NaN or infinite: no rate this cycle
		}
		local := delta / dt
		sess := (p.Sessions + c.Sessions) / 2
		if !(sess >= 0) || math.IsInf(sess, 0) {
			sess = 0
		}
		k, ok := cal[name]
		if !ok {
			k = Calibration{Factor: 1}
		}
		x := k.Apply(local, sess)
		if math.IsNaN(x) || math.IsInf(x, 0) || x < 0 {
			continue
		}
		loads[name] = Series{{Time: cur.At, Value: x}}
		inputs[name] = FastInput{Local: local, Sessions: sess, Factor: k.Factor, Calibrated: k.Calibrated, Note: k.Reason}
	}
	return loads, inputs
}

// fastNote is the plan reason's part that shows a server's fast inputs.
func fastNote(in FastInput, calibrate bool) string {
	s := fmt.Sprintf("fast %.4g B/s / %.3g sess", in.Local, max(in.Sessions, 1))
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
