// Package statuspage renders the status page (GET /) from plain inputs the
// daemon hands it each request: per backend its name, kind, socket, dry run,
// readiness, last cycle and last planned cycle, what its loads are made of,
// and the 15-minute History it keeps (recorded by the daemon's runner once
// per cycle, read here).
//
// The page is what an on-call engineer opens in an incident:
// per backend, its state and what its loads are made of, its imbalance now
// and over the last 15 minutes (an inline SVG), then per server a bar of its
// load against the mean, the load with its unit, the weight now and wanted,
// its open connections and sheds, and the reason (what every server shares
// said once); the sessions shed; the pinned clients (the heaviest, where
// each is pinned, where it was seen and why) and the pin table's state;
// the last cycle's result and error. It is plain HTML from html/template (which escapes every
// name and message: server names and errors come from HAProxy and the
// sources), with no script and no external asset, and it reloads itself.
package statuspage

import (
	"bytes"
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"log/slog"
	"math"
	"net/http"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

//go:embed page.html
var statusHTML string

var statusPage = template.Must(template.New("status").Parse(statusHTML))

// Cycle is a cycle a backend ended, as the page shows it. The daemon
// replaces it whole; the Cycle is not changed after it ended.
type Cycle struct {
	weighter.Cycle
	End time.Time
}

// Planned reports whether the cycle got as far as a plan of the backend's
// servers (a failed read has none; a failed write has one).
func (c Cycle) Planned() bool {
	return c.Result == weighter.ResultOK || c.Result == weighter.ResultSkippedCoverage || len(c.Plan.Servers) > 0
}

// Page is what the page shows, as of Now.
type Page struct {
	Now      time.Time
	Interval time.Duration // the cycles' interval: the page reloads every cycle, within [2s, 30s]
	Ready    bool
	NotReady string // why the daemon is not ready
	Backends []Backend
}

// Backend is one backend as the daemon hands it to the page.
type Backend struct {
	Name, Kind string
	Socket     string // the HAProxy runtime socket, "" for IPVS
	DryRun     bool
	Ready      bool
	Last       Cycle     // the last cycle that ended; zero End: none yet
	Plan       Cycle     // the last cycle that ended with a plan; zero End: none yet
	LastOK     time.Time // the end of the last ok cycle; zero: never
	History    *History  // the backend's last 15 minutes (nil: none)
	Loads      Loads
	// Clients: what the socket table learnt of a pinning backend's
	// clients (nil: not read, or the backend does not pin).
	Clients *Clients
}

// Fast is the fast signal a backend reads, if any.
type Fast int

const (
	FastNone    Fast = iota // the source alone
	FastHAProxy             // HAProxy's fast signal (bytes per connection)
	FastIPVS                // IPVS's connection counts
)

// Loads says what a backend's loads are made of: the page writes it, and
// the loads' unit, from these.
type Loads struct {
	Source string // the source's kind; "" says "the source"
	// Unit is the unit of the source's loads when its kind says it
	// (HAProxy's own counters); nil: the source's own, which the
	// configuration does not say (a query, a render target).
	Unit    *Unit
	Fast    Fast
	FastOff string // with FastNone, why an HAProxy backend does not read the fast signal
}

// Unit is a unit of loads: the symbol written after a number and its
// prefix ("B/s"), how the load column's header says it ("new sessions/s"),
// and whether each load is per open connection (what leastconn weighs)
// rather than the server's.
type Unit struct {
	Symbol, Header string
	PerConnection  bool
}

// Render writes the page p.
func Render(w io.Writer, p Page) error {
	v := statusView{Now: p.Now.UTC().Format(time.RFC3339), Refresh: refreshSeconds(p.Interval), Ready: p.Ready, NotReady: p.NotReady}
	for _, b := range p.Backends {
		v.Backends = append(v.Backends, b.view(p.Now))
	}
	return statusPage.Execute(w, v)
}

// Handler serves the page that page returns, logging to log a page it
// could not render.
func Handler(page func() Page, log *slog.Logger) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		// Rendered whole before a byte is sent, so that a failure is a 500, not half a page.
		var buf bytes.Buffer
		if err := Render(&buf, page()); err != nil {
			log.Error("status page failed", "err", err)
			http.Error(w, "status page: "+err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = buf.WriteTo(w) // a client that went away is no error of the daemon's
	}
}

// statusView is what the template renders.
type statusView struct {
	Now      string
	Refresh  int // seconds
	Ready    bool
	NotReady string
	Backends []backendView
}

type backendView struct {
	Name, Kind string
	Socket     string // the HAProxy runtime socket, "" for IPVS
	DryRun     bool
	Ready      bool
	Cycled     bool   // a cycle has ended
	Result     string // of the last cycle
	OK         bool
	Err        string
	Ended      string // how long ago the last cycle ended
	Duration   string
	LastOK     string // how long ago the last ok cycle ended; "" for never
	Load       string // what the loads are made of: the source, the fast signal and its state
	Imbalance  string // max/mean load of the plan, "1.62×"; "" when undefined
	Hot        bool   // the imbalance is at or above hotRatio
	Spark      sparkView
	Coverage   string
	Hold       string // why the plan held every weight
	Planned    bool   // a cycle has ended with a plan: the fields below are its
	PlanAge    string // how long ago, when it is not the last cycle's
	Changes    int    // written by the plan's cycle, or in a dry run wanted (not a total)
	Unknown    []string
	MoreUnk    int
	Unit       string // the loads' unit, as the load column's header says it
	PerConn    bool   // the loads are per connection: the page adds each server's own (× its connections)
	Reason     string // the part of the reason every server shares, said once
	ShedWord   string // "sheds", or in a dry run "would shed"
	ShedTotal  int    // over the history's span
	Servers    []serverView
	Shed       *shedView // nil for a backend that does not shed
	Pins       *pinsView // nil for a backend that does not pin
}

// shedView is the plan's session shedding: the sessions closed (or, in a
// dry run, that would be), or why none.
type shedView struct {
	None  string // why nothing is shed, when nothing is
	Sheds []shedRowView
}

type shedRowView struct {
	Server, Session, Client, Rate, Age, Ratio, Outcome, Reason string
}

type serverView struct {
	Name, Address string
	Load          string // with its unit and SI prefix
	Exact         string // the load as once writes it, for the cell's title
	Ratio         string // load / the backend's mean
	PerConn       bool   // the backend's loads are per connection (its ServerRatio column is shown)
	ServerRatio   string // with loads per connection: the server's load (× its connections) over the mean of those; "—" unknown
	Bar           barView
	Action        string
	Reason        string // what is the server's own; the shared part is the backend's Reason
	Age           string
	Conns         string // open connections, as the fast signal read them; "—" when not read
	Sheds         int    // over the history's span
	Now, Desired  int
	Differs       bool
}

// maxUnknownShown bounds the names of unknown series the page lists.
const maxUnknownShown = 20

// refreshSeconds is how often the page reloads: every cycle, within [2s, 30s].
func refreshSeconds(interval time.Duration) int {
	return int(min(max(math.Ceil(interval.Seconds()), 2), 30))
}

// view is the backend as the page shows it.
func (in Backend) view(now time.Time) backendView {
	last, plan, lastOK, u := in.Last, in.Plan, in.LastOK, in.Loads
	hist := in.History.view(now)
	b := backendView{Name: in.Name, Kind: in.Kind, Socket: in.Socket, DryRun: in.DryRun, Ready: in.Ready,
		Spark: sparkOf(hist.Worst), ShedWord: "sheds"}
	if in.DryRun {
		b.ShedWord = "would shed"
	}
	for _, n := range hist.Sheds {
		b.ShedTotal += n
	}
	if !lastOK.IsZero() {
		b.LastOK = ago(now, lastOK)
	}
	b.Load = u.loadText(last.Signal)
	if last.End.IsZero() {
		return b
	}
	c := last.Cycle
	b.Cycled, b.Result, b.OK = true, c.Result, c.Result == weighter.ResultOK
	if c.Err != nil {
		b.Err = c.Err.Error()
	}
	b.Ended, b.Duration = ago(now, last.End), c.Duration.Round(time.Millisecond).String()
	if plan.End.IsZero() {
		return b
	}
	if plan.End != last.End {
		b.PlanAge = ago(now, plan.End)
	}
	c = plan.Cycle
	b.Planned = true
	if validImbalance(c.Plan.Imbalance) {
		b.Imbalance, b.Hot = ratioText(c.Plan.Imbalance), c.Plan.Imbalance >= hotRatio
	}
	if len(c.Plan.Servers) > 0 {
		b.Coverage = fmt.Sprintf("%.0f%%", 100*c.Plan.Coverage)
	}
	if c.Plan.Hold {
		b.Hold = c.Plan.Reason
	}
	b.Unknown = c.Plan.Unknown[:min(len(c.Plan.Unknown), maxUnknownShown)]
	b.MoreUnk = len(c.Plan.Unknown) - len(b.Unknown)
	lu := u.loadUnit(c.Signal)
	b.Unit, b.PerConn = lu.header, lu.perConn
	b.Changes, b.Servers = u.serverRows(now, c, hist.Sheds)
	reasons := make([]string, len(b.Servers))
	for i, s := range b.Servers {
		reasons[i] = s.Reason
	}
	var own []string
	b.Reason, own = sharedReason(reasons)
	for i := range b.Servers {
		b.Servers[i].Reason = own[i]
	}
	b.Shed = shedOf(c)
	b.Pins = pinsOf(now, c, in.History, in.Clients)
	return b
}

// serverRows are the plan's servers as the page shows them, with the
// changes the cycle wrote (or, in a dry run, wants).
func (u Loads) serverRows(now time.Time, c weighter.Cycle, sheds map[string]int) (changes int, rows []serverView) {
	written := make(map[string]int, len(c.Written))
	for _, ch := range c.Written {
		written[ch.Server] = ch.Weight
	}
	changes = len(c.Written)
	lu := u.loadUnit(c.Signal)
	unit := lu.symbol
	bars := barsOf(c.Plan.Servers)
	serverRatios := serverLoadRatios(c)
	for i, s := range c.Plan.Servers {
		sv := serverView{Name: s.Server, Address: s.Address, Load: weighter.QuantityText(s.Load, unit), Exact: weighter.LoadText(s.Load),
			Ratio: ratioText(bars[i].ratio), PerConn: lu.perConn, ServerRatio: ratioText(serverRatios[s.Server]), Bar: bars[i], Action: string(s.Action), Reason: s.Reason,
			Now: s.Current, Desired: s.New, Age: "none", Conns: "—", Sheds: sheds[s.Server]}
		if w, ok := written[s.Server]; ok {
			sv.Now = w
		}
		if s.Action == weighter.ActionSet && !c.Applied {
			sv.Action = "would set"
			changes++
		}
		if t, ok := c.DataTime[s.Server]; ok && !t.IsZero() {
			sv.Age = ago(now, t)
		}
		if c.Signal != nil {
			if in, ok := c.Signal.Servers[s.Server]; ok && validLoad(in.Sessions) {
				sv.Conns = weighter.SIText(in.Sessions)
			}
		}
		sv.Differs = sv.Now != sv.Desired
		rows = append(rows, sv)
	}
	return changes, rows
}

// serverLoadRatios is each server's own load — its load per connection
// times its open connections (at least one, as CombineFast divides) — over the mean of those, for the servers
// the engine weighs. An operator compares servers by what each carries (a
// cache's datapoints/s), not by what one of its connections carries, and
// the two can rank servers differently. NaN where the connections are not
// known.
func serverLoadRatios(c weighter.Cycle) map[string]float64 {
	out := make(map[string]float64, len(c.Plan.Servers))
	if c.Signal == nil {
		return out
	}
	sum, n := 0.0, 0
	for _, s := range c.Plan.Servers {
		out[s.Server] = math.NaN()
		in, ok := c.Signal.Servers[s.Server]
		if !ok || !validLoad(s.Load) || !validLoad(in.Sessions) {
			continue
		}
		out[s.Server] = s.Load * max(in.Sessions, 1) // the load divided by max(sessions, 1): CombineFast
		if s.Action != weighter.ActionSkip {
			sum, n = sum+out[s.Server], n+1
		}
	}
	mean := sum / float64(n)
	for k, v := range out {
		out[k] = v / mean
	}
	return out
}

// validLoad: a finite, non-negative reading.
func validLoad(v float64) bool { return v >= 0 && !math.IsInf(v, 0) }

// shedOf is the cycle's session shedding as the page shows it.
func shedOf(c weighter.Cycle) *shedView {
	p := c.Plan.Shed
	if p == nil {
		return nil
	}
	v := &shedView{None: p.Reason}
	if len(p.Sheds) == 0 && v.None == "" {
		v.None = "no server hot"
	}
	outcome := map[string]weighter.ShedResult{}
	for _, r := range c.Sheds {
		outcome[r.Session.ID] = r
	}
	for _, sh := range p.Sheds {
		row := shedRowView{Server: sh.Session.Server, Session: sh.Session.ID, Client: sh.Session.Client,
			Rate: weighter.QuantityText(sh.Session.Rate, weighter.ShedUnit),
			Age:  weighter.AgeText(sh.Session.Age), Reason: sh.Reason,
			Ratio: ratioText(sh.Ratio) + " → " + ratioText(sh.After), Outcome: "would shed (dry run)"}
		if c.Applied {
			row.Outcome = "not tried"
			if r, ok := outcome[sh.Session.ID]; ok {
				row.Outcome = string(r.Outcome)
				if r.Err != nil {
					row.Outcome += ": " + r.Err.Error()
				}
			}
		}
		v.Sheds = append(v.Sheds, row)
	}
	return v
}

// ago is the time from t to now, rounded for reading.
func ago(now, t time.Time) string {
	d := now.Sub(t)
	switch {
	case d < 0:
		return "0s"
	case d < 10*time.Second:
		return d.Round(100 * time.Millisecond).String()
	default:
		return d.Round(time.Second).String()
	}
}
