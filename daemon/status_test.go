package daemon

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/config"
	"github.com/haproxy-weighter/haproxy-weighter/fastsignal"
	"github.com/haproxy-weighter/haproxy-weighter/haproxy"
	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

func getPage(t *testing.T, srv *httptest.Server, path string) (int, http.Header, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(body)
}

// row matches a server's line of the server table: its name, then past its
// address, bar, load and ratio, its weight (now → desired when they differ)
// and action.
func row(server string, now, desired int, action string) *regexp.Regexp {
	w := strconv.Itoa(now)
	if now != desired {
		w += " → " + strconv.Itoa(desired)
	}
	return regexp.MustCompile(`<tr[^>]*><td class="name">` + regexp.QuoteMeta(server) + `</td>(?s:.*?)<td class="n w">` +
		regexp.QuoteMeta(w) + `</td><td class="act">` + regexp.QuoteMeta(action) + `</td>`)
}

// TestStatusPage: GET / shows each backend's last plan (weight now, desired
// weight, action), its imbalance and result, links the other endpoints and
// reloads itself; other paths are not found.
func TestStatusPage(t *testing.T) {
	f := newDryFixture(t, true, "s1", "s2")
	srv := httptest.NewServer(f.d.handler(f.reg))
	defer srv.Close()

	code, hdr, body := getPage(t, srv, "/")
	if code != http.StatusOK || !strings.HasPrefix(hdr.Get("Content-Type"), "text/html") {
		t.Fatalf("GET / before a cycle: %d %q", code, hdr.Get("Content-Type"))
	}
	if !strings.Contains(body, "No cycle has ended yet") || !strings.Contains(body, "not ready") {
		t.Errorf("before a cycle:\n%s", body)
	}

	f.src.set(map[string]float64{"s1": 10, "s2": 40}, nil)
	f.r.step(context.Background())
	_, _, body = getPage(t, srv, "/")
	for _, want := range []string{`<meta http-equiv="refresh" content="10">`, `<a href="/metrics">`, `<a href="/healthz">`,
		`<a href="/readyz">`, `<span class="badge ok result">ok</span>`,
		`<span class="now imbalance hot" title="imbalance now: the highest load over the mean">1.60×</span>`,
		"changes the plan wants: 2", `<span class="badge dry">dry run: writes nothing</span>`} {
		if !strings.Contains(body, want) {
			t.Errorf("no %q in:\n%s", want, body)
		}
	}
	for _, re := range []*regexp.Regexp{row("s1", 100, 256, "would set"), row("s2", 100, 64, "would set")} {
		if !re.MatchString(body) {
			t.Errorf("no row matching %s in:\n%s", re, body)
		}
	}
	if strings.Contains(body, "<script") {
		t.Error("the page has a script")
	}

	// The source fails: the page shows the error and keeps the last plan.
	f.src.set(nil, errors.New("prometheus: connection refused"))
	f.r.clock.(*testenv.Clock).Advance(10 * time.Second)
	f.r.step(context.Background())
	_, _, body = getPage(t, srv, "/")
	for _, want := range []string{`<span class="badge bad result">source_error</span>`, "fetch loads: prometheus: connection refused",
		"the plan below is from 10s ago"} {
		if !strings.Contains(body, want) {
			t.Errorf("no %q in:\n%s", want, body)
		}
	}
	if !row("s1", 100, 256, "would set").MatchString(body) {
		t.Errorf("the last plan is gone after a failed cycle:\n%s", body)
	}

	if code, _, _ := getPage(t, srv, "/nothing-here"); code != http.StatusNotFound {
		t.Errorf("GET /nothing-here: %d, want 404", code)
	}
}

// TestStatusPageLive: in a live run, "weight now" is what was written.
func TestStatusPageLive(t *testing.T) {
	f := newFixture(t)
	f.r.step(context.Background())
	v := f.r.view(f.clock.Now())
	if v.DryRun || v.Changes != 2 || len(v.Servers) != 2 {
		t.Fatalf("view %+v", v)
	}
	for _, s := range v.Servers {
		if s.Now != s.Desired || s.Action != "set" || s.Differs {
			t.Errorf("after a write: %+v", s)
		}
	}
}

// TestStatusPageEscapes: server names, unknown series and errors come from
// HAProxy and the sources; the page shows them as text, never as markup.
func TestStatusPageEscapes(t *testing.T) {
	evil := `<script>alert(1)</script>`
	attr := `x" onmouseover="alert(2)`
	f := newDryFixture(t, true, evil, attr)
	srv := httptest.NewServer(f.d.handler(f.reg))
	defer srv.Close()
	f.src.set(map[string]float64{evil: 10, attr: 20, `<img src=x onerror=alert(3)>`: 5}, nil)
	f.r.step(context.Background())
	_, _, body := getPage(t, srv, "/")
	for _, want := range []string{"&lt;script&gt;alert(1)&lt;/script&gt;", "x&#34; onmouseover=&#34;alert(2)",
		"&lt;img src=x onerror=alert(3)&gt;"} {
		if !strings.Contains(body, want) {
			t.Errorf("no %q in:\n%s", want, body)
		}
	}
	f.src.set(nil, errors.New(`bad reply <iframe src="http://evil">`))
	f.r.step(context.Background())
	_, _, body = getPage(t, srv, "/")
	if !strings.Contains(body, "bad reply &lt;iframe src=&#34;http://evil&#34;&gt;") {
		t.Errorf("error not escaped:\n%s", body)
	}
	for _, bad := range []string{"<script", "<img", "<iframe", `" onmouseover`} {
		if strings.Contains(body, bad) {
			t.Errorf("%q reached the page as markup:\n%s", bad, body)
		}
	}
}

// TestStatusPageWhileCycling reads the page while the backend's loop cycles
// (run under -race: the page reads what the cycles write).
func TestStatusPageWhileCycling(t *testing.T) {
	f := newDryFixture(t, true, "s1", "s2", "s3")
	f.src.set(map[string]float64{"s1": 10, "s2": 20, "s3": 40}, nil)
	srv := httptest.NewServer(f.d.handler(f.reg))
	defer srv.Close()
	clock := f.r.clock.(*testenv.Clock)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.r.run(ctx, ctx); close(done) }()
	var readers sync.WaitGroup
	for range 4 {
		readers.Go(func() {
			for range 20 {
				if code, _, body := getPage(t, srv, "/"); code != http.StatusOK || !strings.Contains(body, "</html>") {
					t.Errorf("GET /: %d", code)
					return
				}
			}
		})
	}
	for i := range 20 {
		<-clock.Waits() // a cycle ended
		if i%2 == 0 {
			f.src.set(map[string]float64{"s1": 40, "s2": 20, "s3": 10}, nil)
		} else {
			f.src.set(map[string]float64{"s1": 10, "s2": 20, "s3": 40}, nil)
		}
		clock.Advance(10 * time.Second)
		clock.Fire()
	}
	readers.Wait()
	cancel()
	<-done
	if f.tgt.writes != 0 {
		t.Errorf("%d writes in a dry run", f.tgt.writes)
	}
}

// TestStatusPageSheds: a backend that sheds shows the sessions its last plan
// closes (or, in a dry run, would), each with its outcome, or why none.
func TestStatusPageSheds(t *testing.T) {
	f := newDryFixture(t, true, "s1", "s2")
	srv := httptest.NewServer(f.d.handler(f.reg))
	defer srv.Close()
	f.src.set(map[string]float64{"s1": 10, "s2": 40}, nil)
	c := f.r.step(context.Background())
	sh := weighter.Shed{Session: weighter.ShedSession{ID: "0x55d1c0", Server: "s2", Client: "10.0.0.7:51234", Age: 14 * time.Minute, Rate: 12350},
		Ratio: 2.4, After: 1.3, Cycles: 3, Reason: "hot for 3 cycles"}
	set := func(c weighter.Cycle) {
		f.r.mu.Lock()
		f.r.last = lastCycle{Cycle: c, End: f.r.clock.Now()}
		f.r.plan = f.r.last
		f.r.mu.Unlock()
	}

	c.Plan.Shed = &weighter.ShedPlan{Server: "s2", Sheds: []weighter.Shed{sh}}
	set(c)
	_, _, body := getPage(t, srv, "/")
	want := `<tr><td class="name">s2</td><td>0x55d1c0</td><td>10.0.0.7:51234</td><td class="n">12.4 kB/s</td><td class="n">14m</td>` +
		`<td class="n">2.40× → 1.30×</td><td>would shed (dry run)</td><td>hot for 3 cycles</td></tr>`
	if !strings.Contains(body, want) {
		t.Errorf("no %q in:\n%s", want, body)
	}

	c.Applied = true
	c.Sheds = []weighter.ShedResult{{Shed: sh, Outcome: weighter.ShedGone, Err: errors.New("session ended")}}
	set(c)
	if _, _, body = getPage(t, srv, "/"); !strings.Contains(body, "<td>gone: session ended</td>") {
		t.Errorf("no outcome of the live shed in:\n%s", body)
	}

	c.Plan.Shed = &weighter.ShedPlan{Reason: "weights bringing s2 down"}
	set(c)
	if _, _, body = getPage(t, srv, "/"); !strings.Contains(body, "Session shedding: nothing to shed (weights bringing s2 down).") {
		t.Errorf("no reason for no shed in:\n%s", body)
	}
}

// TestStatusPageNumbersHuman: the page writes a load with its unit, three
// significant digits and an SI prefix, and keeps the exact value as once
// writes it (12345.6, not 1.235e+04) in the cell's title.
func TestStatusPageNumbersHuman(t *testing.T) {
	f := newDryFixture(t, true, "s1", "s2")
	f.r.unit.source = config.Source{HAProxy: &haproxy.StatsConfig{Counter: haproxy.CounterBytesOut}}
	f.src.set(map[string]float64{"s1": 12345.6, "s2": 0.000123}, nil)
	f.r.step(context.Background())
	v := f.r.view(f.r.clock.Now())
	require.Len(t, v.Servers, 2)
	assert.Equal(t, "B/s", v.Unit)
	assert.Equal(t, []string{"12.3 kB/s", "12345.6"}, []string{v.Servers[0].Load, v.Servers[0].Exact})
	assert.Equal(t, []string{"123 µB/s", "0.000123"}, []string{v.Servers[1].Load, v.Servers[1].Exact})
	srv := httptest.NewServer(f.d.handler(f.reg))
	defer srv.Close()
	_, _, body := getPage(t, srv, "/")
	assert.Contains(t, body, `<th class="n">load<br><small>B/s</small></th>`)
	assert.Contains(t, body, `<td class="n load" title="12345.6">12.3 kB/s</td>`)
	assert.NotRegexp(t, `[0-9]e[+-][0-9]`, body, "a number in exponent form")
	assert.NotContains(t, body, "NaN")
}

// TestStatusPageKeepsPlanAcrossReload: the runner a reload starts shows the
// last plan of the one it replaced until its own first cycle.
func TestStatusPageKeepsPlanAcrossReload(t *testing.T) {
	f := newDryFixture(t, true, "s1", "s2")
	f.src.set(map[string]float64{"s1": 10, "s2": 40}, nil)
	f.r.step(context.Background())
	next := newRunner(f.r.unit, f.r.timing, f.r.clock, f.d.metrics, slog.New(slog.DiscardHandler))
	next.inherit(f.r)
	v := next.view(f.r.clock.Now())
	if !v.Cycled || !v.Planned || len(v.Servers) != 2 || v.Servers[0].Desired != 256 {
		t.Errorf("after a reload the page shows %+v", v)
	}
}

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
	h := newStatusHistory()
	t0 := time.Unix(1_800_000_000, 0)
	cycle := func(at time.Time, imbalance float64, applied bool, sheds ...weighter.ShedResult) lastCycle {
		c := weighter.Cycle{Result: weighter.ResultOK, Applied: applied, Sheds: sheds,
			Plan: weighter.Plan{Imbalance: imbalance, Servers: []weighter.ServerPlan{{Server: "s1"}}}}
		return lastCycle{Cycle: c, End: at}
	}
	shed := func(server string, o weighter.ShedOutcome) weighter.ShedResult {
		return weighter.ShedResult{Shed: weighter.Shed{Session: weighter.ShedSession{Server: server}}, Outcome: o}
	}
	// Two cycles in one 10 s slot: the worst stays.
	h.record(cycle(t0, 1.4, true))
	h.record(cycle(t0.Add(2*time.Second), 1.9, true, shed("s2", weighter.ShedClosed), shed("s2", weighter.ShedGone)))
	h.record(cycle(t0.Add(4*time.Second), 1.2, true, shed("s2", weighter.ShedClosed), shed("s3", weighter.ShedFailed)))
	// A failed cycle (no plan) and a plan with no imbalance leave a gap.
	h.record(lastCycle{Cycle: weighter.Cycle{Result: weighter.ResultSourceError}, End: t0.Add(10 * time.Second)})
	h.record(cycle(t0.Add(20*time.Second), 0, true))
	h.record(cycle(t0.Add(30*time.Second), 1.1, true))

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
	h.record(dry)
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
		h.record(cycle(t0.Add(time.Duration(i)*time.Second), 1+float64(i%100)/100, true))
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
	src := func(kind string, cfg any) *managedBackend {
		s, err := config.NewSource(kind, cfg)
		require.NoError(t, err)
		return &managedBackend{source: s}
	}
	for _, tc := range []struct {
		name string
		u    *managedBackend
		sig  *weighter.Signal
		want loadUnit
	}{
		{"bytes", src("haproxy", &haproxy.StatsConfig{Counter: haproxy.CounterBytesIn}), nil, loadUnit{"B/s", "B/s", false}},
		{"bytes per connection", src("haproxy", &haproxy.StatsConfig{Counter: haproxy.CounterBytesOut, PerConnection: true}), nil,
			loadUnit{"B/s", "B/s per connection", true}},
		{"new sessions", src("haproxy", &haproxy.StatsConfig{Counter: haproxy.CounterSessionsTotal}), nil, loadUnit{"sess/s", "new sessions/s", false}},
		{"open sessions", src("haproxy", &haproxy.StatsConfig{Counter: haproxy.CounterCurrentSessions}), nil, loadUnit{"sess", "open sessions", false}},
		{"a query", &managedBackend{}, nil, unknownUnit},
		{"the fast signal alone", &managedBackend{fast: &fastUnit{chain: &fastsignal.Chain{}}}, &weighter.Signal{Pipeline: weighter.PipelineFast},
			loadUnit{"B/s", "B/s per connection", true}},
		{"calibrated: the source's, per connection", &managedBackend{fast: &fastUnit{chain: &fastsignal.Chain{}}}, &weighter.Signal{Pipeline: weighter.PipelineCalibrated},
			loadUnit{"", "per connection, in the source's unit", true}},
		{"IPVS counts", &managedBackend{fast: &fastUnit{}}, &weighter.Signal{Pipeline: weighter.PipelineFast}, unknownUnit},
	} {
		assert.Equal(t, tc.want, tc.u.loadUnit(tc.sig), tc.name)
	}
}

// TestStatusPageHistory: the runner feeds the page's history once per
// cycle, and the runner a reload starts goes on with it.
func TestStatusPageHistory(t *testing.T) {
	f := newDryFixture(t, true, "s1", "s2")
	clock := f.r.clock.(*testenv.Clock)
	for _, loads := range []map[string]float64{{"s1": 10, "s2": 40}, {"s1": 10, "s2": 10}, {"s1": 10, "s2": 30}} {
		f.src.set(loads, nil)
		f.r.step(context.Background())
		clock.Advance(10 * time.Second)
	}
	next := newRunner(f.r.unit, f.r.timing, f.r.clock, f.d.metrics, slog.New(slog.DiscardHandler))
	next.inherit(f.r)
	v := next.view(clock.Now())
	assert.Equal(t, "1.60×", v.Spark.Peak)
	assert.Equal(t, []string{"259.5,16.6 262.5,37.0 265.5,20.0"}, v.Spark.Lines)
}

// TestStatusPageHostile: names, addresses and reasons come from HAProxy,
// the sources and the configuration; in every place the page writes them
// (the shared reason, a row's own reason, the bar's row, the shed table,
// the backend's header) they are text, never markup.
func TestStatusPageHostile(t *testing.T) {
	hostile := []string{`<script>alert(1)</script>`, `"><img src=x onerror=alert(2)>`, `x' onmouseover='alert(3)`}
	f := newDryFixture(t, true, "s1")
	f.r.unit.Backend.Name = `be"><svg onload=alert(4)>`
	srv := httptest.NewServer(f.d.handler(f.reg))
	defer srv.Close()
	c := weighter.Cycle{Result: weighter.ResultOK, Plan: weighter.Plan{Imbalance: 1.5, Coverage: 1}}
	for i, h := range hostile {
		c.Plan.Servers = append(c.Plan.Servers, weighter.ServerPlan{Server: h, Address: h, Load: float64(10 * (i + 1)),
			Current: 100, New: 100, Action: weighter.ActionKeep, Reason: "shared " + hostile[1] + "; own " + h})
	}
	sh := weighter.Shed{Session: weighter.ShedSession{ID: hostile[0], Server: hostile[1], Client: hostile[2], Rate: 1}, Reason: hostile[0]}
	c.Plan.Shed = &weighter.ShedPlan{Server: hostile[1], Sheds: []weighter.Shed{sh}}
	f.r.mu.Lock()
	f.r.last = lastCycle{Cycle: c, End: f.r.clock.Now()}
	f.r.plan = f.r.last
	f.r.mu.Unlock()
	f.r.history.record(f.r.last)

	_, _, body := getPage(t, srv, "/")
	assert.Contains(t, body, `<p class="shared">Every server: <span class="reason">shared &#34;&gt;&lt;img src=x onerror=alert(2)&gt;</span></p>`)
	assert.Contains(t, body, `<td class="name">&lt;script&gt;alert(1)&lt;/script&gt;</td>`)
	assert.Contains(t, body, `<td class="why">own x&#39; onmouseover=&#39;alert(3)</td>`)
	assert.Contains(t, body, `be&#34;&gt;&lt;svg onload=alert(4)&gt;`)
	for _, bad := range []string{"<script", "<img", "<svg onload", `' onmouseover`, `" onerror`} {
		assert.NotContains(t, body, bad)
	}
	assert.Equal(t, 3+1, strings.Count(body, "<svg "), "one bar per server and the sparkline, no other svg")
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

	u := &managedBackend{fast: &fastUnit{chain: &fastsignal.Chain{}}}
	_, rows := u.serverRows(time.Now(), c, nil)
	for _, r := range rows {
		assert.True(t, r.PerConn, r.Name)
	}
	assert.Equal(t, "1.67×", rows[1].ServerRatio)
	assert.Equal(t, "—", rows[3].ServerRatio)
}
