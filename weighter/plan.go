package weighter

import (
	"encoding/json"
	"math"
	"time"
)

// Action is what a Plan does with one server.
type Action string

// Actions of a ServerPlan.
const (
	// ActionSet: write ServerPlan.New.
	ActionSet Action = "set"
	// ActionKeep: the engine looked at the server and leaves its weight (deadband, missing data, hold).
	ActionKeep Action = "keep"
	// ActionSkip: the server is not the engine's to weight (operator drain/maint, down).
	ActionSkip Action = "skip"
)

// Plan is the outcome of one cycle for one backend: what every server's load and
// weight are and what will be written. Dry-run prints it, writers apply
// Changes(), metrics export it and the simulator scores it.
type Plan struct {
	Backend   string       `json:"backend"` // set by the caller; the Controller does not know it
	Time      time.Time    `json:"time"`
	Function  string       `json:"function"`
	Servers   []ServerPlan `json:"servers"` // sorted by server name
	Hold      bool         `json:"hold"`    // nothing changes this cycle (coverage guard)
	Reason    string       `json:"reason,omitempty"`
	Coverage  float64      `json:"coverage"`  // share of weightable servers with valid data
	Imbalance float64      `json:"imbalance"` // max/mean of the valid loads, 0 when undefined
	// Scale is the factor every weight of the backend was multiplied by after
	// the servers' shares were decided, so the largest is max_weight (1 =
	// none): a common factor moves no traffic.
	Scale   float64  `json:"scale"`
	Unknown []string `json:"unknown,omitempty"`
	// Reset: HAProxy reset every weight the daemon wrote to the
	// configuration's (a restart or reload), and this plan starts again from
	// them rather than re-applying the old ones (ReasonReset).
	Reset bool `json:"reset,omitempty"`
	// Settling: the configured weights HAProxy went back to are kept while
	// the clients reconnect after a reset (this cycle's or an earlier one's);
	// nothing is written.
	Settling bool `json:"settling,omitempty"`
	// RareArrivals: new connections are rare on this backend (run_rare)
	// and the run bound applies (a connection per server, as of the last
	// cycle that shared weights out), so it spreads a burst over
	// run_rare_spread servers.
	RareArrivals bool `json:"rare_arrivals,omitempty"`
	// Shed is the cycle's session shedding, for a backend that sheds: the
	// sessions to close after the weights are written, or why none.
	Shed *ShedPlan `json:"shed,omitempty"`
	// Pins is the cycle's pinning of heavy clients, for a backend that
	// pins: the pins wanted, the table writes, and why.
	Pins *PinPlan `json:"pins,omitempty"`
}

// ServerPlan is one server's line of a Plan.
type ServerPlan struct {
	Server string `json:"server"`
	// Address is the server's ip:port as the target reports it: with
	// server-template or service discovery the name (srv1..srvN) says little.
	Address string  `json:"address,omitempty"`
	Load    float64 `json:"load"` // the (smoothed) load used; NaN = no data
	Current int     `json:"current"`
	Raw     int     `json:"raw"` // weighting function output on the backend's scale, before rate limit and deadband (at most 256)
	New     int     `json:"new"`
	Action  Action  `json:"action"`
	Reason  string  `json:"reason,omitempty"`
}

// Changes returns the weights to write: one Change per server with Action set.
func (p Plan) Changes() []Change {
	var out []Change
	for _, s := range p.Servers {
		if s.Action == ActionSet {
			out = append(out, Change{Server: s.Server, Weight: s.New})
		}
	}
	return out
}

// jsonServerPlan is ServerPlan with a nullable load, in the same field order.
type jsonServerPlan struct {
	Server  string   `json:"server"`
	Address string   `json:"address,omitempty"`
	Load    *float64 `json:"load"`
	Current int      `json:"current"`
	Raw     int      `json:"raw"`
	New     int      `json:"new"`
	Action  Action   `json:"action"`
	Reason  string   `json:"reason,omitempty"`
}

// MarshalJSON writes a NaN (no data) load as null, which JSON can carry.
func (s ServerPlan) MarshalJSON() ([]byte, error) {
	out := jsonServerPlan{Server: s.Server, Address: s.Address, Current: s.Current, Raw: s.Raw, New: s.New, Action: s.Action, Reason: s.Reason}
	if !math.IsNaN(s.Load) && !math.IsInf(s.Load, 0) {
		out.Load = &s.Load
	}
	return json.Marshal(out)
}

// UnmarshalJSON reads a null load back as NaN.
func (s *ServerPlan) UnmarshalJSON(b []byte) error {
	var in jsonServerPlan
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	*s = ServerPlan{Server: in.Server, Address: in.Address, Load: math.NaN(), Current: in.Current, Raw: in.Raw, New: in.New, Action: in.Action, Reason: in.Reason}
	if in.Load != nil {
		s.Load = *in.Load
	}
	return nil
}
