package sim

import (
	"bytes"
	"fmt"
	"os"
	"time"

	"gopkg.in/yaml.v3"
)

// Scenario describes one simulated backend, its traffic and its monitoring pipeline.
type Scenario struct {
	Name        string        `yaml:"name"`
	Seed        uint64        `yaml:"seed"`
	Servers     int           `yaml:"servers"`
	Connections int           `yaml:"connections"` // open connections kept on average
	MeanLife    time.Duration `yaml:"mean_life"`   // exponential lifetime mean
	Rate        Distribution  `yaml:"rate"`        // per-connection rate, datapoints/s
	Duration    time.Duration `yaml:"duration"`    // simulated time
	Warmup      time.Duration `yaml:"warmup"`      // excluded from the figures
	Step        time.Duration `yaml:"step"`        // tick of the model
	Window      time.Duration `yaml:"window"`      // sampling window of the figures
	Resolution  time.Duration `yaml:"resolution"`  // scrape interval / Graphite resolution
	RateWindow  time.Duration `yaml:"rate_window"` // window of the rate the weighter sees
	Delay       time.Duration `yaml:"delay"`       // ingestion delay before a point is visible
	Interval    time.Duration `yaml:"interval"`    // weighter interval
	AgentEvery  time.Duration `yaml:"agent_every"` // agent-check report interval
	// AgentCapacity is the load at which the agent-check peer reports 0%, as a
	// multiple of the scenario's mean per-server load.
	AgentCapacity float64 `yaml:"agent_capacity"`
	Events        []Event `yaml:"events"`

	// The fresh-data model (docs/research/fresh-by-default.md), for every
	// strategy and pipeline alike. Left out, a scenario is one balancer in
	// front of identical servers, as above.

	// Costs is each server's cost per datapoint (default 1): its true load is
	// cost × the rates of its connections + background.
	Costs map[string]float64 `yaml:"costs,omitempty"`
	// Background is each server's load that does not pass through HAProxy, as a
	// share of the mean per-server load (0.3 = +30 % of the mean).
	Background map[string]float64 `yaml:"background,omitempty"`
	// Balancers are the shares of the clients each balancer in front of the same
	// servers receives (each with its own HAProxy placement and daemon); empty is
	// one balancer.
	Balancers []float64 `yaml:"balancers,omitempty"`
	// FastSignal is the local signal the fast pipelines read every cycle: live
	// (show sess all stream totals, the default), contstats (show stat with
	// option contstats: 5 s lumps per connection) or closed (show stat without).
	FastSignal string `yaml:"fast_signal,omitempty"`
	// ExternalOutage is when the external source answers nothing (down,
	// unreachable): the calibration is held, then expires.
	ExternalOutage *Outage `yaml:"external_outage,omitempty"`
	// Drift makes a share of the clients change their rate once in mid-life
	// (a customer's traffic grows or shrinks while it stays connected).
	Drift *Drift `yaml:"drift,omitempty"`
	// Ramp spreads the initial population's arrivals uniformly over the first
	// Ramp of the run, each placed by the weights of its moment, as the bench's
	// -ramp does (a balancer whose clients arrived over hours); 0 = all at 0.
	Ramp time.Duration `yaml:"ramp,omitempty"`
	// Clients, when set, are the scenario's only clients instead of
	// connections drawn from rate and mean_life: each holds one connection
	// from its own address from the start to the end of the run, on the
	// server it names (where it was when the run starts); nothing connects
	// but a shed or restarted client coming back (a few carbon-relays, each
	// with one connection to a cache).
	Clients []FixedClient `yaml:"clients,omitempty"`
	// Returning makes every client come back when its connection ends, from
	// the same address and at its rate, after 0.1-2 s, for a new lifetime
	// drawn from mean_life; no other client arrives (the clients are the
	// initial population and the events'). A relay or an agent reconnects
	// when its connection ends; by default an ended client is gone and
	// Poisson arrivals bring new ones.
	Returning bool `yaml:"returning,omitempty"`
}

// FixedClient is one client of Scenario.Clients: its rate (datapoints/s)
// and the server its connection is on at the start (s1, s2, …).
type FixedClient struct {
	Rate   float64 `yaml:"rate"`
	Server string  `yaml:"server"`
}

// Drift is a change of rate in mid-life: each client, with probability
// Share, multiplies its rate by Factor (half of them) or divides it by
// Factor (the other half) at a uniformly drawn point of its lifetime, or,
// with To set, at a uniform moment of the run in [From, To) if it is
// connected then (the bench's -scenario drift, where every drift of the run
// falls within five minutes).
type Drift struct {
	Share  float64       `yaml:"share"`
	Factor float64       `yaml:"factor"`
	From   time.Duration `yaml:"from,omitempty"`
	To     time.Duration `yaml:"to,omitempty"`
}

// Outage is a span of simulated time.
type Outage struct {
	From time.Duration `yaml:"from"`
	To   time.Duration `yaml:"to"`
}

// Distribution is a heavy-tailed per-connection rate distribution.
type Distribution struct {
	Kind   string  `yaml:"kind"`   // lognormal | pareto
	Median float64 `yaml:"median"` // lognormal median
	Sigma  float64 `yaml:"sigma"`  // lognormal sigma
	Min    float64 `yaml:"min"`    // pareto scale (smallest rate)
	Alpha  float64 `yaml:"alpha"`  // pareto shape
	Cap    float64 `yaml:"cap"`    // largest rate; 0 = no cap
}

// Event kinds.
const (
	EventWhale  = "whale"  // Count connections of Rate arrive, living Life
	EventAdd    = "add"    // an empty server joins
	EventRemove = "remove" // Server leaves; its clients reconnect at once
	EventRamp   = "ramp"   // arrival rate moves linearly to Factor× over Over
	// EventBurst: Count heavy clients of Rate connect within Over (a
	// deploy, a restart of a customer's agents), each living Life (0: drawn
	// as any client's, exponential with the mean life). They are tracked as
	// whales (recovery figures).
	EventBurst = "burst"
	// EventRestart: a balancer's HAProxy restarts: its runtime weights go
	// back to the configuration's, and every client it carries reconnects
	// within Over (0: 5 s), keeping its rate and the rest of its lifetime.
	EventRestart = "restart"
)

// Event is something that happens to the backend at a given time.
type Event struct {
	At     time.Duration `yaml:"at"`
	Kind   string        `yaml:"kind"`
	Count  int           `yaml:"count"`  // whale
	Rate   float64       `yaml:"rate"`   // whale
	Life   time.Duration `yaml:"life"`   // whale
	Server string        `yaml:"server"` // remove
	Factor float64       `yaml:"factor"` // ramp
	Over   time.Duration `yaml:"over"`   // ramp, burst, restart
	// Balancer is the restarting balancer's index (0: the first).
	Balancer int `yaml:"balancer,omitempty"`
	// Peers: the restart keeps the balancer's stick table (pins), as a
	// reload does with a `peers` section naming the local host; without
	// it the table starts empty, as after a restart.
	Peers bool `yaml:"peers,omitempty"`
}

// DefaultScenario is the scenario haproxy-weighter-sim runs without arguments:
// 8 servers, about 240 connections of lognormal rates (median 35/s, sigma 1.5, capped
// at 5000/s) living 30 s on average, 10 s resolution, 5 s weighter interval, and one
// of each event.
func DefaultScenario() Scenario {
	return Scenario{
		Name:          "default",
		Seed:          1,
		Servers:       8,
		Connections:   240,
		MeanLife:      30 * time.Second,
		Rate:          Distribution{Kind: "lognormal", Median: 35, Sigma: 1.5, Cap: 5000},
		Duration:      60 * time.Minute,
		Warmup:        3 * time.Minute,
		Step:          100 * time.Millisecond,
		Window:        10 * time.Second,
		Resolution:    10 * time.Second,
		RateWindow:    20 * time.Second,
		Interval:      5 * time.Second,
		AgentEvery:    2 * time.Second,
		AgentCapacity: 2,
		Events: []Event{
			{At: 20 * time.Minute, Kind: EventWhale, Count: 3, Rate: 3000, Life: 5 * time.Minute},
			{At: 30 * time.Minute, Kind: EventAdd},
			{At: 40 * time.Minute, Kind: EventRemove, Server: "s1"},
			{At: 48 * time.Minute, Kind: EventRamp, Factor: 1.5, Over: 2 * time.Minute},
		},
	}
}

// LoadScenario reads a YAML scenario; keys it leaves out keep DefaultScenario's
// values, except events: a file has only the events it lists.
func LoadScenario(path string) (Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Scenario{}, fmt.Errorf("read scenario: %w", err)
	}
	return ParseScenario(data)
}

// ParseScenario decodes a YAML scenario over DefaultScenario, rejecting unknown keys.
func ParseScenario(data []byte) (Scenario, error) {
	sc := DefaultScenario()
	sc.Events = nil
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&sc); err != nil {
		return Scenario{}, fmt.Errorf("parse scenario: %w", err)
	}
	if err := sc.Validate(); err != nil {
		return Scenario{}, err
	}
	return sc, nil
}
