package weighter

import (
	"context"
	"errors"
)

// Pinning places a backend's known heavy clients on chosen servers. Weights
// steer only new connections, and at connect time HAProxy cannot tell a heavy
// client from a light one; a pin can. HAProxy's mechanism is a stick table
// in the backend matched on the source address only (`stick-table type ip …`
// and `stick match src`): an entry `key <client ip> → server_id` sends that
// client's new connections to that server, and every other client is
// balanced by the weights as usual. A pin beats drain and weight 0 (HAProxy's
// persistence rule), so a pin is withdrawn before its server is drained.

// Client is one client source address of a backend as the fast signal saw it
// at one read: what it sends, over all its connections.
type Client struct {
	// Addr is the client's IP address without a port ("10.1.2.3",
	// "2001:db8::1"): what a stick table of type ip keys on.
	Addr string
	// Rate is what the client sends in the backend's direction, in the fast
	// signal's unit (bytes/s), summed over its connections; NaN when not
	// measured yet (its connections are new since the previous read).
	Rate float64
	// Conns is its open connections at the read.
	Conns int
}

// Pin is one stick-table entry: new connections from Client go to Server.
type Pin struct {
	Client string `json:"client"`
	Server string `json:"server"`
}

// PinChanges are the stick-table writes of one cycle. A target writes them
// in the same batch as the weights: Clear first (a pin beats a drain, so a
// pin on a server the batch drains must be gone before the drain), then the
// weights, then Set.
type PinChanges struct {
	Clear []string `json:"clear,omitempty"` // client addresses whose entry is removed
	Set   []Pin    `json:"set,omitempty"`   // entries created or moved
}

// Empty reports whether there is nothing to write.
func (c PinChanges) Empty() bool { return len(c.Clear) == 0 && len(c.Set) == 0 }

// PinTable is a backend's pin table as the target read it.
type PinTable struct {
	// Name is the stick table's name (the backend's, for a table declared in it).
	Name string
	// Size is how many entries the table holds at most; Used how many it holds.
	Size, Used int
	// Pins are its entries, each with the server it names. An entry naming
	// a server id no server of the backend has is in Stray.
	Pins  []Pin
	Stray []string
}

// ErrNoPinTable: the backend has no stick table matched on the client's
// source address, so clients cannot be pinned (weighting goes on without).
var ErrNoPinTable = errors.New("no pin table")

// ErrPinTableFull: the stick table has no room for another entry.
var ErrPinTableFull = errors.New("pin table full")

// PinTarget is a Target that can pin clients: an HAProxy backend with a stick
// table. A backend without one answers Pins with an error wrapping
// ErrNoPinTable.
type PinTarget interface {
	Target
	// Pins reads the backend's pin table.
	Pins(ctx context.Context) (PinTable, error)
	// SetWeightsAndPins writes, as one batch, pins.Clear, then changes, then
	// pins.Set, with the errors of SetWeights (a failed pin write is a
	// *PinError, joined with the others).
	SetWeightsAndPins(ctx context.Context, changes []Change, pins PinChanges) error
}

// PinError attributes a failed stick-table write to one client.
type PinError struct {
	Client string
	Err    error
}

func (e *PinError) Error() string { return "pin " + e.Client + ": " + e.Err.Error() }

func (e *PinError) Unwrap() error { return e.Err }
