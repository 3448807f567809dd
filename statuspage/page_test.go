package statuspage

import (
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// TestStatusNumbers: three significant digits with an SI prefix, rounding
// carried into the prefix, and never NaN, Inf or an exponent on the page.
func TestStatusNumbers(t *testing.T) {
	for _, tc := range []struct {
		v        float64
		si, qty  string // siText, weighter.QuantityText(v, "B/s")
		unitless string // weighter.QuantityText(v, "")
	}{
		{30900, "30.9k", "30.9 kB/s", "30.9k"},
		{30949, "30.9k", "30.9 kB/s", "30.9k"},
		{1200, "1.2k", "1.2 kB/s", "1.2k"},
		{1000, "1k", "1 kB/s", "1k"},
		{999.96, "1k", "1 kB/s", "1k"}, // rounds up into the next prefix
		{999.4, "999", "999 B/s", "999"},
		{512, "512", "512 B/s", "512"},
		{12.345, "12.3", "12.3 B/s", "12.3"},
		{1, "1", "1 B/s", "1"},
		{0.35, "0.35", "0.35 B/s", "0.35"}, // a CPU share keeps no prefix
		{0.0123, "0.0123", "0.0123 B/s", "0.0123"},
		{0.005, "5m", "5 mB/s", "5m"},
		{0.000123, "123µ", "123 µB/s", "123µ"},
		{0, "0", "0 B/s", "0"},
		{2.5e6, "2.5M", "2.5 MB/s", "2.5M"},
		{1.25e9, "1.25G", "1.25 GB/s", "1.25G"},
		{7.1e18, "7.1E", "7.1 EB/s", "7.1E"},
		{3e21, "3e+21", "3e+21 B/s", "3e+21"}, // beyond the prefixes
		{-1200, "-1.2k", "no data", "no data"},
		{math.NaN(), "—", "no data", "no data"},
		{math.Inf(1), "—", "no data", "no data"},
		{math.Inf(-1), "—", "no data", "no data"},
	} {
		assert.Equal(t, tc.si, weighter.SIText(tc.v), "weighter.SIText(%v)", tc.v)
		assert.Equal(t, tc.qty, weighter.QuantityText(tc.v, "B/s"), "weighter.QuantityText(%v, B/s)", tc.v)
		assert.Equal(t, tc.unitless, weighter.QuantityText(tc.v, ""), "weighter.QuantityText(%v, \"\")", tc.v)
	}
	for v, want := range map[float64]string{1.625: "1.62×", 1: "1.00×", 0: "0.00×", math.NaN(): "—", math.Inf(1): "—", -1: "—"} {
		assert.Equal(t, want, ratioText(v), "ratioText(%v)", v)
	}
}

// TestStatusSharedReason: what every server's reason says is written once;
// each row keeps only its own parts.
func TestStatusSharedReason(t *testing.T) {
	for _, tc := range []struct {
		name   string
		in     []string
		shared string
		own    []string
	}{
		{"all the same", []string{"hold: only 1 of 3 servers have valid data", "hold: only 1 of 3 servers have valid data",
			"hold: only 1 of 3 servers have valid data"}, "hold: only 1 of 3 servers have valid data", []string{"", "", ""}},
		{"a shared part", []string{"rebalance; fast 31 kB/s", "rebalance; fast 12 kB/s"}, "rebalance",
			[]string{"fast 31 kB/s", "fast 12 kB/s"}},
		{"shared parts in the first server's order", []string{"a; x; b", "b; y; a"}, "a; b", []string{"x", "y"}},
		{"nothing shared", []string{"rebalance", "deadband"}, "", []string{"rebalance", "deadband"}},
		{"one server without a reason", []string{"rebalance", ""}, "", []string{"rebalance", ""}},
		{"one server", []string{"rebalance"}, "", []string{"rebalance"}},
		{"none", nil, "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			shared, own := sharedReason(tc.in)
			assert.Equal(t, tc.shared, shared)
			assert.Equal(t, tc.own, own)
		})
	}
}

// TestStatusBars: one scale per backend, the mean at its middle (or further
// left when a server is above twice the mean), the colour by load / mean.
func TestStatusBars(t *testing.T) {
	plan := func(loads ...float64) []weighter.ServerPlan {
		out := make([]weighter.ServerPlan, len(loads))
		for i, l := range loads {
			out[i] = weighter.ServerPlan{Server: strconv.Itoa(i), Load: l, Action: weighter.ActionKeep}
		}
		return out
	}
	bars := barsOf(plan(50, 100, 125, 125)) // mean 100
	for i, want := range []barView{{Fill: 50, Mean: 100, Class: "ok"}, {Fill: 100, Mean: 100, Class: "ok"},
		{Fill: 125, Mean: 100, Class: "warm"}, {Fill: 125, Mean: 100, Class: "warm"}} {
		assert.Equal(t, want, barView{Fill: bars[i].Fill, Mean: bars[i].Mean, Class: bars[i].Class}, "server %d", i)
	}
	bars = barsOf(plan(10, 10, 100, math.NaN())) // mean 40, top 100 > 2 × 40: the top fills the bar
	assert.Equal(t, []int{20, 20, 200, 0}, []int{bars[0].Fill, bars[1].Fill, bars[2].Fill, bars[3].Fill})
	assert.Equal(t, 80, bars[2].Mean)
	assert.Equal(t, []string{"ok", "ok", "hot", "none"}, []string{bars[0].Class, bars[1].Class, bars[2].Class, bars[3].Class})
	assert.InDelta(t, 2.5, bars[2].ratio, 1e-9)
	assert.True(t, math.IsNaN(bars[3].ratio))

	skipped := plan(100, 100, 1000) // an operator's drained server is not in the mean
	skipped[2].Action = weighter.ActionSkip
	bars = barsOf(skipped)
	assert.InDelta(t, 10, bars[2].ratio, 1e-9)

	for _, b := range barsOf(plan(0, 0, math.NaN())) { // no load anywhere: no scale, no NaN in the page
		assert.Equal(t, 0, b.Fill)
		assert.Equal(t, 0, b.Mean)
	}
}

// TestStatusHistory: the ring keeps the worst imbalance of each 10 s of the
// last 15 minutes and the sheds of the same span, forgets what is older,
// leaves gaps where no cycle had a plan, and costs the same however long
// it runs.
func TestStatusHistory(t *testing.T) {
	h := NewHistory()
	t0 := time.Unix(1_800_000_000, 0)
	cycle := func(at time.Time, imbalance float64, applied bool, sheds ...weighter.ShedResult) Cycle {
		c := weighter.Cycle{Result: weighter.ResultOK, Applied: applied, Sheds: sheds,
			Plan: weighter.Plan{Imbalance: imbalance, Servers: []weighter.ServerPlan{{Server: "s1"}}}}
		return Cycle{Cycle: c, End: at}
	}
	shed := func(server string, o weighter.ShedOutcome) weighter.ShedResult {
		return weighter.ShedResult{Shed: weighter.Shed{Session: weighter.ShedSession{Server: server}}, Outcome: o}
	}
	// Two cycles in one 10 s slot: the worst stays.
	h.Record(cycle(t0, 1.4, true))
	h.Record(cycle(t0.Add(2*time.Second), 1.9, true, shed("s2", weighter.ShedClosed), shed("s2", weighter.ShedGone)))
	h.Record(cycle(t0.Add(4*time.Second), 1.2, true, shed("s2", weighter.ShedClosed), shed("s3", weighter.ShedFailed)))
	// A failed cycle (no plan) and a plan with no imbalance leave a gap.
	h.Record(Cycle{Cycle: weighter.Cycle{Result: weighter.ResultSourceError}, End: t0.Add(10 * time.Second)})
	h.Record(cycle(t0.Add(20*time.Second), 0, true))
	h.Record(cycle(t0.Add(30*time.Second), 1.1, true))

	v := h.view(t0.Add(30 * time.Second))
	require.Len(t, v.Worst, 90)
	assert.Equal(t, 1.9, v.Worst[86])
	assert.True(t, math.IsNaN(v.Worst[87]) && math.IsNaN(v.Worst[88]), "gaps: %v", v.Worst[86:])
	assert.Equal(t, 1.1, v.Worst[89])
	assert.True(t, math.IsNaN(v.Worst[0]))
	assert.Equal(t, map[string]int{"s2": 2}, v.Sheds, "only the closes that closed count")

	// A dry run counts the sessions it would have closed.
	dry := cycle(t0.Add(31*time.Second), 1.1, false)
	dry.Plan.Shed = &weighter.ShedPlan{Sheds: []weighter.Shed{{Session: weighter.ShedSession{Server: "s3"}}}}
	h.Record(dry)
	assert.Equal(t, map[string]int{"s2": 2, "s3": 1}, h.view(t0.Add(31*time.Second)).Sheds)

	// 15 minutes on, the first slot has left the span, the later ones not yet.
	v = h.view(t0.Add(15 * time.Minute))
	assert.Equal(t, 1.1, v.Worst[89-(15*60-30)/10])
	assert.Equal(t, map[string]int{"s3": 1}, v.Sheds, "the sheds of the first slot left with it")
	v = h.view(t0.Add(time.Hour))
	for i, w := range v.Worst {
		assert.True(t, math.IsNaN(w), "slot %d of an hour later: %v", i, w)
	}
	assert.Empty(t, v.Sheds)

	// A day of 1 s cycles: the ring reuses its slots, the newest win.
	for i := range 86_400 {
		h.Record(cycle(t0.Add(time.Duration(i)*time.Second), 1+float64(i%100)/100, true))
	}
	v = h.view(t0.Add(86_399 * time.Second))
	assert.InDelta(t, 1.99, v.Worst[89], 1e-9, "the worst of the last 10 s")
	assert.Len(t, h.buckets, 90)
}

// TestStatusSpark: the imbalance over 15 minutes as polylines, 1× at the
// bottom, the top the next half above the peak (at least 2×), a gap where
// no cycle had a plan, a lone point drawn as a dash.
func TestStatusSpark(t *testing.T) {
	worst := make([]float64, historySlots)
	for i := range worst {
		worst[i] = math.NaN()
	}
	v := sparkOf(worst)
	assert.Empty(t, v.Lines)
	assert.Equal(t, "", v.Peak)
	assert.Equal(t, "2×", v.Top)
	assert.Equal(t, 20, v.HotY, "1.5× halfway up a 1×..2× box of 40")

	worst[0], worst[1], worst[2] = 1, 2, 1.5 // then a gap, then one point
	worst[89] = 1
	v = sparkOf(worst)
	assert.Equal(t, []string{"1.5,37.0 4.5,3.0 7.5,20.0", "267.5,37.0 268.5,37.0"}, v.Lines)
	assert.Equal(t, "2.00×", v.Peak)

	worst[40] = 3.2 // the box grows to the next half above the peak
	v = sparkOf(worst)
	assert.Equal(t, "3.5×", v.Top)
	assert.Equal(t, "3.20×", v.Peak)
	assert.Len(t, v.Lines, 3)
	assert.Equal(t, "120.5,7.1 121.5,7.1", v.Lines[1], "3.2× in a 1×..3.5× box: 3 + 34 × (1 − 2.2/2.5)")
	assert.Equal(t, int(math.Round(3+34*(1-0.5/2.5))), v.HotY)
}

// TestStatusLoadUnit: the loads' unit is said only where the daemon knows it,
// and a load per connection is said to be one.
func TestStatusLoadUnit(t *testing.T) {
	stats := func(u Unit) Loads { return Loads{Source: "haproxy", Unit: &u} }
	for _, tc := range []struct {
		name string
		u    Loads
		sig  *weighter.Signal
		want loadUnit
	}{
		{"bytes", stats(Unit{"B/s", "B/s", false}), nil, loadUnit{"B/s", "B/s", false}},
		{"bytes per connection", stats(Unit{"B/s", "B/s per connection", true}), nil, loadUnit{"B/s", "B/s per connection", true}},
		{"the fast signal, over a known unit", stats(Unit{"sess", "open sessions", false}), &weighter.Signal{Pipeline: weighter.PipelineFast},
			loadUnit{"B/s", "B/s per connection", true}},
		{"a query", Loads{}, nil, unknownUnit},
		{"the fast signal alone", Loads{Fast: FastHAProxy}, &weighter.Signal{Pipeline: weighter.PipelineFast},
			loadUnit{"B/s", "B/s per connection", true}},
		{"calibrated: the source's, per connection", Loads{Fast: FastHAProxy}, &weighter.Signal{Pipeline: weighter.PipelineCalibrated},
			loadUnit{"", "per connection, in the source's unit", true}},
		{"IPVS counts", Loads{Fast: FastIPVS}, &weighter.Signal{Pipeline: weighter.PipelineFast}, unknownUnit},
	} {
		assert.Equal(t, tc.want, tc.u.loadUnit(tc.sig), tc.name)
	}
}

// TestStatusServerLoadRatio: with loads per connection the page adds each
// server's own load over the mean server's, which is what an operator
// compares (two heavy relays on one cache), beside the per-connection ratio
// the weights balance. The two can rank servers differently.
func TestStatusServerLoadRatio(t *testing.T) {
	c := weighter.Cycle{
		Plan: weighter.Plan{Servers: []weighter.ServerPlan{
			{Server: "a", Load: 1000, Action: weighter.ActionSet}, // 1 heavy connection
			{Server: "b", Load: 100, Action: weighter.ActionSet},  // 20 light ones
			{Server: "c", Load: 300, Action: weighter.ActionSet},
			{Server: "d", Load: 50, Action: weighter.ActionSet}, // connections unknown
		}},
		Signal: &weighter.Signal{Pipeline: weighter.PipelineCalibrated, Servers: map[string]weighter.FastInput{
			"a": {Sessions: 1}, "b": {Sessions: 20}, "c": {Sessions: 2},
		}},
	}
	got := serverLoadRatios(c)
	// a 1000, b 2000, c 600: mean 1200.
	assert.InDelta(t, 1000.0/1200, got["a"], 1e-9)
	assert.InDelta(t, 2000.0/1200, got["b"], 1e-9, "b carries the most, though its connections are the lightest")
	assert.InDelta(t, 600.0/1200, got["c"], 1e-9)
	assert.True(t, math.IsNaN(got["d"]), "no connection count: unknown, not 0")

	u := Loads{Fast: FastHAProxy}
	_, rows := u.serverRows(time.Now(), c, nil)
	for _, r := range rows {
		assert.True(t, r.PerConn, r.Name)
	}
	assert.Equal(t, "1.67×", rows[1].ServerRatio)
	assert.Equal(t, "—", rows[3].ServerRatio)
}

// TestRender: the page from plain inputs, as a caller other than the daemon
// would hand them: the reload interval bounded to [2s, 30s], every backend
// with its socket and what its loads are made of, a server's row, and
// names from HAProxy and the configuration as text, never markup.
func TestRender(t *testing.T) {
	now := time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC)
	c := Cycle{End: now.Add(-2 * time.Second), Cycle: weighter.Cycle{Result: weighter.ResultOK, Duration: 3 * time.Millisecond,
		Plan: weighter.Plan{Imbalance: 1.6, Coverage: 1, Servers: []weighter.ServerPlan{
			{Server: `<b>s1</b>`, Load: 40, Current: 100, New: 64, Action: weighter.ActionSet},
			{Server: "s2", Load: 10, Current: 100, New: 256, Action: weighter.ActionSet}}}}}
	h := NewHistory()
	h.Record(c)
	p := Page{Now: now, Interval: 500 * time.Millisecond, NotReady: `be "x" <no ok cycle>`, Backends: []Backend{
		{Name: `be"><svg onload=alert(1)>`, Kind: "haproxy", Socket: "/run/haproxy/admin.sock", DryRun: true, Last: c, Plan: c, History: h,
			Loads: Loads{Source: "prometheus", Fast: FastHAProxy}},
		{Name: "idle", Kind: "lvs", Loads: Loads{Source: "graphite", Fast: FastIPVS}},
	}}
	var page strings.Builder
	require.NoError(t, Render(&page, p))
	body := page.String()
	assert.Contains(t, body, `<meta http-equiv="refresh" content="2">`)
	assert.Contains(t, body, "at 2026-12-07T08:00:00Z, reloads every 2s")
	assert.Contains(t, body, `not ready</span>: be &#34;x&#34; &lt;no ok cycle&gt;`)
	assert.Contains(t, body, `be&#34;&gt;&lt;svg onload=alert(1)&gt;`)
	assert.Contains(t, body, `on <code>/run/haproxy/admin.sock</code>`)
	assert.Contains(t, body, "IPVS connection counts, with graphite (not read yet)")
	assert.Contains(t, body, `<td class="name">&lt;b&gt;s1&lt;/b&gt;</td>`)
	assert.Contains(t, body, "changes the plan wants: 2")
	assert.Equal(t, 1, strings.Count(body, "<polyline"), "the history's one slot")
	for _, bad := range []string{"<b>s1", "<svg onload", `"x"`} {
		assert.NotContains(t, body, bad)
	}

	for interval, want := range map[time.Duration]int{0: 2, 2500 * time.Millisecond: 3, 10 * time.Second: 10, time.Hour: 30} {
		assert.Equal(t, want, refreshSeconds(interval), "%v", interval)
	}
}

// TestHandler: the page is served whole, never cached.
func TestHandler(t *testing.T) {
	h := Handler(func() Page { return Page{Now: time.Unix(0, 0), Ready: true} }, slog.New(slog.DiscardHandler))
	rec := httptest.NewRecorder()
	h(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	assert.Equal(t, http.StatusOK, rec.Code)
	assert.Equal(t, "text/html; charset=utf-8", rec.Header().Get("Content-Type"))
	assert.Equal(t, "no-store", rec.Header().Get("Cache-Control"))
	assert.Contains(t, rec.Body.String(), `<span class="ok" id="ready">ready</span>`)
	assert.True(t, strings.HasSuffix(rec.Body.String(), "</html>\n"), "the whole page")
}

// TestRenderPins: a backend that pins shows its pins heaviest first, at
// most maxPinRows and how many more, each with the line of the cycle that
// set it (remembered while the pin stays, forgotten with it), the pins
// withdrawn, the clients beyond the bound, and its table's state: missing
// says the two lines to add. Client addresses are text, never markup.
func TestRenderPins(t *testing.T) {
	now := time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC)
	servers := []weighter.ServerPlan{{Server: "s1", Load: 40, Current: 100, New: 100, Action: weighter.ActionKeep},
		{Server: "s2", Load: 10, Current: 100, New: 100, Action: weighter.ActionKeep}}
	cycle := func(at time.Time, applied bool, p weighter.PinPlan, clients ...weighter.Client) Cycle {
		return Cycle{End: at, Cycle: weighter.Cycle{Result: weighter.ResultOK, Applied: applied, Plan: weighter.Plan{Servers: servers, Pins: &p},
			Signal: &weighter.Signal{Pipeline: weighter.PipelineFast, Clients: clients}}}
	}
	render := func(c Cycle, h *History, clients *Clients) string {
		var page strings.Builder
		require.NoError(t, Render(&page, Page{Now: now, Backends: []Backend{{Name: "be", Last: c, Plan: c, History: h, Clients: clients}}}))
		return page.String()
	}
	h := NewHistory()
	hostile := `<img src=x onerror=alert(1)>`
	set := weighter.PinWhy{Client: "10.0.0.1", Rate: 2000, From: "s1", To: "s2", Reason: "pin 10.0.0.1 (2 kB/s, 1.6× mean server load) to s2, now on s1: projected max/mean 0.5 lower"}
	first := cycle(now.Add(-5*time.Minute), true, weighter.PinPlan{Table: "be", Pins: []weighter.Pin{{Client: "10.0.0.1", Server: "s2"}, {Client: hostile, Server: "s2"}},
		Changes: weighter.PinChanges{Set: []weighter.Pin{{Client: "10.0.0.1", Server: "s2"}}}, Why: []weighter.PinWhy{set}, Imbalance: 1.6, Projected: 1.1})
	h.Record(first)
	// Five minutes on, the pin is in place: its plan has no line for it.
	later := cycle(now.Add(-2*time.Second), true, weighter.PinPlan{Table: "be", Pins: first.Plan.Pins.Pins, Imbalance: 1.1, Projected: 1.1,
		Changes: weighter.PinChanges{Clear: []string{"10.0.0.7"}},
		Why:     []weighter.PinWhy{{Client: "10.0.0.7", From: "s1", Reason: "clear the pin of 10.0.0.7 on s1: not heavy for 10m (forget 10m)"}}},
		weighter.Client{Addr: "10.0.0.1", Rate: 2100, Conns: 1}, weighter.Client{Addr: hostile, Rate: 30, Conns: 1})
	h.Record(later)
	body := render(later, h, &Clients{Open: 40, Tracked: 30, Untracked: 4})
	assert.Contains(t, body, `<tr><td class="name">10.0.0.1</td><td class="n" title="2100">2.1 kB/s</td><td>s2</td><td>s1</td><td class="n">5m0s</td><td class="why">`+set.Reason+`</td></tr>`)
	assert.Less(t, strings.Index(body, ">10.0.0.1<"), strings.Index(body, "&lt;img src=x"), "heaviest first")
	assert.Contains(t, body, `<td class="name">&lt;img src=x onerror=alert(1)&gt;</td><td class="n" title="30">30 B/s</td><td>s2</td><td>—</td><td class="n">—</td>`)
	assert.NotContains(t, body, "<img")
	assert.Contains(t, body, "this cycle set 0 and cleared 1")
	assert.Contains(t, body, "<li>clear the pin of 10.0.0.7 on s1: not heavy for 10m (forget 10m)</li>")
	assert.Contains(t, body, "max/mean with the pinned clients where they sit 1.10×, where pinned 1.10×")
	assert.Contains(t, body, `client addresses tracked: 30, <span class="bad">untracked: 4</span> (beyond the bound: never pinned)`)
	assert.Contains(t, body, `table <code>be</code>: <span class="ok">ok</span>`)

	// The pin withdrawn, then set again: the old line is not its reason.
	h.Record(cycle(now.Add(-time.Second), true, weighter.PinPlan{Table: "be"}))
	again := cycle(now, true, weighter.PinPlan{Table: "be", Pins: []weighter.Pin{{Client: "10.0.0.1", Server: "s2"}}})
	h.Record(again)
	assert.NotContains(t, render(again, h, nil), set.Reason)

	// A thousand pins: the heaviest 50 and how many more; a dry run says would.
	var many weighter.PinPlan
	var clients []weighter.Client
	for i := range 1000 {
		addr := fmt.Sprintf("10.1.%d.%d", i/250, i%250)
		many.Pins = append(many.Pins, weighter.Pin{Client: addr, Server: "s2"})
		clients = append(clients, weighter.Client{Addr: addr, Rate: float64(1000 + i), Conns: 1})
	}
	many.Why = []weighter.PinWhy{{Client: "10.1.3.249", To: "s2", Reason: "pin 10.1.3.249 (2 kB/s) to s2, where it sits"}}
	dry := cycle(now, false, many, clients...)
	h = NewHistory()
	h.Record(dry)
	body = render(dry, h, nil)
	assert.Equal(t, maxPinRows, strings.Count(body, `<tr><td class="name">10.1.`))
	assert.Contains(t, body, "and 950 more pinned clients (lighter).")
	assert.Contains(t, body, ">would pin 10.1.3.249 (2 kB/s) to s2, where it sits<", "the heaviest, in a dry run")
	assert.NotContains(t, body, ">10.1.0.0<", "the lightest is not listed")
	assert.Contains(t, body, "dry run: the pins the plan wants; none written")

	// The table's states.
	for _, tc := range []struct {
		p    weighter.PinPlan
		want string
	}{
		{weighter.PinPlan{NoTable: true, Reason: "no pin table: backend be has no stick table"},
			"Clients not pinned: the backend has no pin table. Add these two lines to the backend in HAProxy's configuration and reload it (<code>pin: false</code> silences this):</p>\n" +
				"<pre class=\"fix\">  stick-table type ip size 100k expire 2h\n  stick match src</pre>"},
		{weighter.PinPlan{Table: "be", Full: true, Reason: "pin table be full (2 of 2 entries)"},
			`table <code>be</code>: <span class="bad">full</span>: no new pin (give its stick-table a larger <code>size</code>)`},
		{weighter.PinPlan{Table: "be", TableErr: "show table be: i/o timeout", Reason: "pin table could not be read: show table be: i/o timeout"},
			`table <code>be</code>: <span class="bad">not read</span>: show table be: i/o timeout; the pins stay as they were`},
	} {
		assert.Contains(t, render(cycle(now, true, tc.p), nil, nil), tc.want)
	}

	// A backend that does not pin has no section.
	plain := cycle(now, true, weighter.PinPlan{})
	plain.Plan.Pins = nil
	assert.NotContains(t, render(plain, nil, nil), "Pinned clients")
}
