package daemon

import (
	"context"
	"errors"
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

// row matches a server's line of the plan table.
func row(server string, now, desired int, action string) *regexp.Regexp {
	return regexp.MustCompile(`<tr[^>]*><td>` + regexp.QuoteMeta(server) + `</td><td>[^<]*</td><td class="n">[^<]+</td><td class="n">` +
		strconv.Itoa(now) + `</td><td class="n">` + strconv.Itoa(desired) + `</td><td>` + regexp.QuoteMeta(action) + `</td>`)
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
		`<a href="/readyz">`, "dry run: writes nothing", `<span class="ok result">ok</span>`,
		`<b class="imbalance">1.60</b>`, "changes the plan wants: 2"} {
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
	f.r.clock.(*fakeClock).advance(10 * time.Second)
	f.r.step(context.Background())
	_, _, body = getPage(t, srv, "/")
	for _, want := range []string{`<span class="bad result">source_error</span>`, "fetch loads: prometheus: connection refused",
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
	clock := f.r.clock.(*fakeClock)
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
		<-clock.waits // a cycle ended
		if i%2 == 0 {
			f.src.set(map[string]float64{"s1": 40, "s2": 20, "s3": 10}, nil)
		} else {
			f.src.set(map[string]float64{"s1": 10, "s2": 20, "s3": 40}, nil)
		}
		clock.advance(10 * time.Second)
		clock.ticker <- clock.Now()
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
	want := `<tr><td>s2</td><td>0x55d1c0</td><td>10.0.0.7:51234</td><td class="n">12,350 B/s</td><td class="n">14m</td>` +
		`<td class="n">2.40 → 1.30</td><td>would shed (dry run)</td><td>hot for 3 cycles</td></tr>`
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

// TestStatusPageNumbersAsOnce: the page writes a load as once's table does
// (1.235e+04 on one and 12345.6 on the other read as two different numbers).
func TestStatusPageNumbersAsOnce(t *testing.T) {
	f := newDryFixture(t, true, "s1", "s2")
	f.src.set(map[string]float64{"s1": 12345.6, "s2": 0.000123}, nil)
	f.r.step(context.Background())
	v := f.r.view(f.r.clock.Now())
	if len(v.Servers) != 2 || v.Servers[0].Load != "12345.6" || v.Servers[1].Load != "0.000123" {
		t.Errorf("loads 12345.6 and 0.000123 shown as %+v", v.Servers)
	}
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
