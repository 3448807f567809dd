package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/config"
	"github.com/haproxy-weighter/haproxy-weighter/fastsignal"
	"github.com/haproxy-weighter/haproxy-weighter/haproxy"
	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/haproxy-weighter/haproxy-weighter/statuspage"
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

// renderRunner is the status page of r's backend alone, as of r's clock.
func renderRunner(t *testing.T, r *runner) string {
	t.Helper()
	now := r.clock.Now()
	var page strings.Builder
	require.NoError(t, statuspage.Render(&page, statuspage.Page{Now: now, Interval: r.timing.Interval,
		Backends: []statuspage.Backend{r.status(now)}}))
	return page.String()
}

// TestStatusLoads: what the daemon tells the page its loads are made of.
func TestStatusLoads(t *testing.T) {
	stats := &haproxy.StatsConfig{Counter: haproxy.CounterBytesIn}
	src, err := config.NewSource("haproxy", stats)
	require.NoError(t, err)
	bytes := &statuspage.Unit{Symbol: "B/s", Header: "B/s"} // the haproxy kind's unit of bytes_in
	for _, tc := range []struct {
		name string
		u    *managedBackend
		want statuspage.Loads
	}{
		{"HAProxy's counters alone", &managedBackend{source: src, fastOff: "no socket"},
			statuspage.Loads{Source: "haproxy", Unit: bytes, FastOff: "no socket"}},
		{"a query", &managedBackend{}, statuspage.Loads{}},
		{"HAProxy's fast signal", &managedBackend{source: src, fast: &fastUnit{chain: &fastsignal.Chain{}}},
			statuspage.Loads{Source: "haproxy", Unit: bytes, Fast: statuspage.FastHAProxy}},
		{"IPVS counts", &managedBackend{fast: &fastUnit{}}, statuspage.Loads{Fast: statuspage.FastIPVS}},
	} {
		assert.Equal(t, tc.want, tc.u.loads(), tc.name)
	}
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
	page := renderRunner(t, f.r)
	if strings.Contains(page, "dry run") || !strings.Contains(page, "weights written by this cycle: 2") {
		t.Fatalf("not a live run's two writes:\n%s", page)
	}
	for _, re := range []*regexp.Regexp{row("s1", 256, 256, "set"), row("s2", 64, 64, "set")} {
		if !re.MatchString(page) {
			t.Errorf("after a write, no row matching %s:\n%s", re, page)
		}
	}
	if strings.Contains(page, " differs\"") {
		t.Errorf("a row whose weight differs from the one wanted after a write:\n%s", page)
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
		f.r.last = statuspage.Cycle{Cycle: c, End: f.r.clock.Now()}
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
	src, err := config.NewSource("haproxy", &haproxy.StatsConfig{Counter: haproxy.CounterBytesOut})
	require.NoError(t, err)
	f.r.unit.source = src
	f.src.set(map[string]float64{"s1": 12345.6, "s2": 0.000123}, nil)
	f.r.step(context.Background())
	srv := httptest.NewServer(f.d.handler(f.reg))
	defer srv.Close()
	_, _, body := getPage(t, srv, "/")
	assert.Contains(t, body, `<th class="n">load<br><small>B/s</small></th>`)
	assert.Contains(t, body, `<td class="n load" title="12345.6">12.3 kB/s</td>`)
	assert.Contains(t, body, `<td class="n load" title="0.000123">123 µB/s</td>`)
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
	page := renderRunner(t, next)
	for _, re := range []*regexp.Regexp{row("s1", 100, 256, "would set"), row("s2", 100, 64, "would set")} {
		if !re.MatchString(page) {
			t.Errorf("after a reload the page has no row matching %s:\n%s", re, page)
		}
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
	page := renderRunner(t, next)
	assert.Contains(t, page, "1.60×", "the peak")
	assert.Contains(t, page, `points="259.5,16.6 262.5,37.0 265.5,20.0"`)
	assert.Equal(t, 1, strings.Count(page, "<polyline"), "one run of slots with data")
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
	f.r.last = statuspage.Cycle{Cycle: c, End: f.r.clock.Now()}
	f.r.plan = f.r.last
	f.r.mu.Unlock()
	f.r.history.Record(f.r.last)

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

// TestStatusPagePinsLive: a daemon pinning on a real HAProxy whose clients
// connect from distinct addresses (the socket table measures each): the
// two heavy clients are pinned through the stick table, the page lists
// them (rate, server, where seen, why) with the table's state and the
// client addresses tracked, chromium shows that table, and /metrics
// exports the pins per server and the clients learnt.
func TestStatusPagePinsLive(t *testing.T) {
	front := testenv.FreePort(t)
	srv := func() string { return testenv.StartDiscardServer(t) }
	h := testenv.StartHAProxy(t, testenv.HAProxyDefaults+fmt.Sprintf(`
frontend fe
  bind 127.0.0.1:%d
  default_backend be
backend be
  balance leastconn
  stick-table type ip size 100 expire 2h
  stick match src
  server s1 %s
  server s2 %s
  server s3 %s
`, front, srv(), srv(), srv()))
	addr := fmt.Sprintf("127.0.0.1:%d", front)
	for range 3 {
		testenv.WriteEvery(t, testenv.DialFrom(t, "127.0.0.1", addr, 1), 200, 20*time.Millisecond)
	}
	for _, heavy := range []string{"127.0.0.2", "127.0.0.3"} {
		testenv.WriteEvery(t, testenv.DialFrom(t, heavy, addr, 1), 20_000, 20*time.Millisecond)
	}
	reg := prometheus.NewRegistry()
	var logs testenv.SyncBuffer
	d := New(kernelConfig(t, h.Socket, fmt.Sprintf("    pin: {listeners: [%q]}\n", addr)), Options{Registry: reg,
		Log: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	runDaemon(t, d)
	defer func() {
		if t.Failed() {
			t.Log(logs.String())
		}
	}()
	be := map[string]string{"backend": "be"}
	testenv.WaitWithin(t, 30*time.Second, "two clients pinned", func() bool {
		v, _ := seriesValue(t, reg, "haproxy_weighter_pins", be)
		return v == 2
	})
	hc, err := haproxy.New(haproxy.Config{Socket: h.Socket})
	require.NoError(t, err)
	table, err := hc.Backend("be").Pins(testenv.Context(t, 10*time.Second))
	require.NoError(t, err)
	require.Len(t, table.Pins, 2, "HAProxy's table: %+v", table)
	pinnedOn := map[string]string{}
	for _, p := range table.Pins {
		pinnedOn[p.Client] = p.Server
	}
	assert.Contains(t, pinnedOn, "127.0.0.2")
	assert.Contains(t, pinnedOn, "127.0.0.3")

	for state, want := range map[string]float64{"ok": 1, "missing": 0, "full": 0, "error": 0} {
		v, ok := seriesValue(t, reg, "haproxy_weighter_pin_table", map[string]string{"backend": "be", "state": state})
		assert.True(t, ok && v == want, "pin_table{state=%s} %v, want %v", state, v, want)
	}
	sets, _ := seriesValue(t, reg, "haproxy_weighter_pin_writes_total", map[string]string{"backend": "be", "op": "set"})
	assert.GreaterOrEqual(t, sets, 2.0, "pin_writes_total{op=set}")
	pinned, load := 0.0, 0.0
	for _, s := range []string{"s1", "s2", "s3"} {
		n, ok := seriesValue(t, reg, "haproxy_weighter_pinned_clients", map[string]string{"backend": "be", "server": s})
		require.True(t, ok, "pinned_clients{server=%s}", s)
		l, _ := seriesValue(t, reg, "haproxy_weighter_pinned_load", map[string]string{"backend": "be", "server": s})
		pinned, load = pinned+n, load+l
	}
	assert.Equal(t, 2.0, pinned)
	t.Logf("pinned load %.0f B/s; HAProxy's table %v", load, pinnedOn)
	assert.Greater(t, load, 500e3, "the two heavy clients send about 1 MB/s each")
	tracked, ok := seriesValue(t, reg, "haproxy_weighter_clients", map[string]string{"backend": "be", "state": "tracked"})
	assert.True(t, ok && tracked == 3, "clients{state=tracked} %v, want 3 (127.0.0.1, .2, .3)", tracked)

	hs := httptest.NewServer(d.handler(reg))
	defer hs.Close()
	_, _, body := getPage(t, hs, "/")
	assert.Contains(t, body, `<table class="pins">`)
	assert.Contains(t, body, `table <code>be</code>: <span class="ok">ok</span>`)
	assert.Contains(t, body, "client addresses tracked: 3")
	for client, server := range pinnedOn {
		assert.Regexp(t, `<tr><td class="name">`+regexp.QuoteMeta(client)+`</td><td class="n" title="[^"]+">[0-9.]+ [kM]B/s</td><td>`+
			regexp.QuoteMeta(server)+`</td><td>[^<]+</td><td class="n">[^<]+</td><td class="why">pin `+regexp.QuoteMeta(client)+` `, body)
	}
	dom := testenv.ChromiumDOM(t, hs.URL+"/")
	assert.Equal(t, 2, strings.Count(dom, `<tr><td class="name">127.0.0.`), "the pinned clients' rows in chromium's DOM")
	assert.Contains(t, dom, "Pinned clients")
}
