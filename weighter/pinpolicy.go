package weighter

import (
	"errors"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/internal/duration"
	"github.com/haproxy-weighter/haproxy-weighter/internal/field"
)

// PinPolicy bounds the pinning of one backend's heavy clients (pin.go says
// why and how HAProxy does it). Pinning is off unless a backend configures it.
type PinPolicy struct {
	// Heavy (> 0): a client is heavy, and worth a pin, when what it sends
	// (its rate × the calibration factor) is at least Heavy × the mean
	// server load.
	Heavy float64 `yaml:"heavy" json:"heavy"`
	// MaxPins (>= 1) is the most clients pinned on the backend at once (the
	// heaviest are kept); the table's free room bounds the new ones too.
	MaxPins int `yaml:"max_pins" json:"max_pins"`
	// MinGain (>= 0): an existing pin moves to another server only when the
	// move lowers the projected max/mean of the backend by at least this.
	MinGain float64 `yaml:"min_gain" json:"min_gain"`
	// MaxMoves (>= 0) is the most existing pins moved in one cycle.
	MaxMoves int `yaml:"max_moves" json:"max_moves"`
	// Settle (>= 0): a pin set or moved is not moved again for this long.
	// A pin acts only when its client reconnects, and the weights meanwhile
	// send new connections to the server it left as to any light one, so
	// until both have happened the projection is a guess, not a
	// measurement: a move made on it chases the noise.
	Settle duration.Duration `yaml:"settle" json:"settle"`
	// Forget (> 0): a pinned client not seen heavy for this long loses its
	// pin (a quiet client goes back to the weights' balancing).
	Forget duration.Duration `yaml:"forget" json:"forget"`
	// Shared: the stick table is replicated between balancers by an
	// HAProxy peers section, so that a client has one pin on every
	// balancer. An entry this daemon did not write is another balancer's
	// daemon's: it stays where it is, counts in the projection, and is
	// never moved, forgotten or counted in MaxPins here; it is withdrawn
	// only from a server that cannot take a pin (HAProxy's peers do not
	// replicate a clear, so each daemon clears its own table). Off: every
	// entry of the table is this daemon's to manage.
	Shared bool `yaml:"shared" json:"shared"`
}

// DefaultPin returns the recommended pinning factors. Heavy is a quarter of
// the mean server load: the weights balance a server by steering the light
// clients' new connections, which works while the heavy clients a server
// holds stay well below the mean; two or three clients of a quarter each
// landing together (a restart storm places them by lottery) already take
// most of a server that the weights cannot empty, and lighter clients are
// many per server, where the lottery averages out. A pin is one table entry
// and one runtime command, so pinning everyone would cost writes for
// nothing. MaxPins keeps a batch and the table's dump short; MinGain (0.1 of
// max/mean) and MaxMoves (2) keep a pin from flapping between servers whose
// loads swap by noise: every move is a reconnect the client pays for when
// its connection is shed or ends. Settle (one minute) keeps a pin from
// being moved before its client has reconnected to it and the weights have
// answered: without it, on the real bench with 20 s clients that come
// back, a pin moved every few seconds (88 moves in five minutes). Forget is
// ten minutes, longer than a client's usual reconnect gap and the shed
// cooldown.
func DefaultPin() PinPolicy {
	return PinPolicy{
		Heavy:    0.25,
		MaxPins:  1000,
		MinGain:  0.1,
		MaxMoves: 2,
		Settle:   duration.Duration(time.Minute),
		Forget:   duration.Duration(10 * time.Minute),
	}
}

// Validate reports every invalid field, each message naming the field.
func (p PinPolicy) Validate() error {
	var errs []error
	add := func(key, format string, args ...any) { errs = append(errs, field.Errorf(key, format, args...)) }
	if !(p.Heavy > 0) || isInf(p.Heavy) {
		add("heavy", "pin.heavy must be > 0 (a share of the mean server load), got %v", p.Heavy)
	}
	if p.MaxPins < 1 {
		add("max_pins", "pin.max_pins must be >= 1, got %d", p.MaxPins)
	}
	if !(p.MinGain >= 0) || isInf(p.MinGain) {
		add("min_gain", "pin.min_gain must be >= 0 (a drop of max/mean), got %v", p.MinGain)
	}
	if p.MaxMoves < 0 {
		add("max_moves", "pin.max_moves must be >= 0, got %d", p.MaxMoves)
	}
	if p.Settle < 0 {
		add("settle", "pin.settle must be >= 0, got %v", p.Settle)
	}
	if p.Forget <= 0 {
		add("forget", "pin.forget must be > 0, got %v", p.Forget)
	}
	return errors.Join(errs...)
}
