package e2e

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/haproxy"
	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// setWeight sets one server's weight on HAProxy, as an operator would.
func setWeight(t *testing.T, socket, server string, w int) {
	t.Helper()
	c, err := haproxy.New(haproxy.Config{Socket: socket})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Backend("be_ingest").SetWeights(ctx, []weighter.Change{{Server: server, Weight: w}}); err != nil {
		t.Fatalf("set weight %s %d: %v", server, w, err)
	}
}

// planRow matches a server's row of the status page's server table (in the
// page as served, and in the DOM chromium dumps): its address, its bar, its
// load as a number with an SI prefix (the exact one in the title), its
// weight ("now → desired" when they differ) and action; action "" is any.
func planRow(server string, now, desired int, action string) *regexp.Regexp {
	act := regexp.QuoteMeta(action)
	if action == "" {
		act = `[^<]*`
	}
	w := strconv.Itoa(now)
	if now != desired {
		w += " → " + strconv.Itoa(desired)
	}
	// cell is any text that does not end the row (</tr>): a match stays in one row.
	cell := `(?:[^<]|<[^/]|</[^t]|</t[^r])*?`
	return regexp.MustCompile(`<tr[^>]*>\s*<td class="name">` + regexp.QuoteMeta(server) + `</td>\s*<td class="addr">127\.0\.0\.1:[0-9]+</td>` +
		cell + `<svg class="bar"` + cell + `<td class="n load" title="[0-9.e+]+">[0-9.]+[kMG]?</td>` + cell +
		`<td class="n w">` + regexp.QuoteMeta(w) + `</td>\s*<td class="act">` + act + `</td>`)
}

// TestDryRun runs the daemon with --dry-run against a real HAProxy and
// Prometheus for several cycles: it plans the balanced weights, exports them
// as desired weights, says each change once, is ready, and never writes to
// HAProxy, not even restore_on_exit's weights at SIGTERM.
func TestDryRun(t *testing.T) {
	h := testenv.StartHAProxy(t, haproxyConfig(t))
	prom := testenv.StartPrometheus(t, promData(time.Now()).String())
	listen := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	cfg := writeConfig(t, promConfig(h.Socket, prom.URL, listen)) // restore_on_exit: true

	// once --apply writes nothing to a backend with dry_run: true either.
	dry := writeConfig(t, promConfig(h.Socket, prom.URL, listen)+"    dry_run: true\n")
	r := runCmd(t, "once", "--config", dry, "--apply")
	if r.code != 0 || !strings.Contains(r.stdout, "backend be_ingest: ok; dry run (dry_run: true), nothing written") {
		t.Errorf("once --apply with dry_run: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if got := planTable(t, r.stdout); !maps.Equal(got, want) {
		t.Errorf("once's plan %v, want %v\n%s", got, want, r.stdout)
	}
	if got := testenv.Weights(t, h.Socket, "be_ingest"); !maps.Equal(got, initial) {
		t.Fatalf("once --apply wrote to a dry_run backend: %v", got)
	}

	d := startDaemon(t, listen, "--config", cfg, "--dry-run")

	ok := `haproxy_weighter_cycles_total{backend="be_ingest",result="ok"}`
	testenv.WaitWithin(t, 20*time.Second, "3 ok cycles", func() bool { return d.metric(ok) >= 3 })
	if got := testenv.Weights(t, h.Socket, "be_ingest"); !maps.Equal(got, initial) {
		t.Fatalf("a dry run changed HAProxy's weights: %v", got)
	}
	for _, s := range servers {
		desired := d.metric(fmt.Sprintf(`haproxy_weighter_server_desired_weight{backend="be_ingest",server=%q}`, s))
		actual := d.metric(fmt.Sprintf(`haproxy_weighter_server_weight{backend="be_ingest",server=%q}`, s))
		if desired != float64(want[s]) || actual != float64(initial[s]) {
			t.Errorf("%s: desired %v, weight %v; want %d and HAProxy's %d", s, desired, actual, want[s], initial[s])
		}
	}
	for series, want := range map[string]float64{
		`haproxy_weighter_dry_run{backend="be_ingest"}`:                     1,
		`haproxy_weighter_dry_run_weight_writes_total{backend="be_ingest"}`: 4, // once per server, however many cycles
		`haproxy_weighter_weight_writes_total{backend="be_ingest"}`:         0,
	} {
		if got := d.metric(series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	if code, body := d.get("/readyz"); code != http.StatusOK {
		t.Errorf("/readyz %d %s: a dry run whose cycles are ok is ready", code, body)
	}
	promtoolCheck(t, d)
	if n := strings.Count(d.logs.String(), `"msg":"would set weights"`); n != 1 {
		t.Errorf("%d would-set lines after several cycles wanting the same weights, want 1", n)
	}

	// An operator sets a weight: the daemon reports it as HAProxy's, still
	// wants its own, and does not write it back.
	setWeight(t, h.Socket, "s1", 50)
	s1 := `haproxy_weighter_server_weight{backend="be_ingest",server="s1"}`
	testenv.WaitWithin(t, 10*time.Second, "s1's weight 50 exported", func() bool { return d.metric(s1) == 50 })
	code, page := d.get("/")
	if code != http.StatusOK || !strings.Contains(page, "dry run: writes nothing") {
		t.Errorf("status page %d:\n%s", code, page)
	}
	for _, re := range []*regexp.Regexp{planRow("s1", 50, 256, "would set"), planRow("s4", 100, 32, "would set")} {
		if !re.MatchString(page) {
			t.Errorf("status page has no row matching %s:\n%s", re, page)
		}
	}

	if code := d.stop(); code != 0 {
		t.Errorf("exit code %d after SIGTERM", code)
	}
	wantAfter := map[string]int{"s1": 50, "s2": 100, "s3": 100, "s4": 100}
	if got := testenv.Weights(t, h.Socket, "be_ingest"); !maps.Equal(got, wantAfter) {
		t.Errorf("after the dry run stopped (restore_on_exit on): weights %v, want the operator's %v", got, wantAfter)
	}
}

// hostileSeries is a Prometheus series for no server of the backend, named
// to break out of the page's markup if the name were not escaped.
const hostileSeries = `<img src=x onerror="alert(1)">`

// TestStatusPageInChromium loads the status page of a daemon weighting a
// real HAProxy in Debian's headless chromium and reads the DOM it built: the
// plan table (weight now and desired weight of every server, as HAProxy has
// them), the links, the self-refresh, and a hostile series name as text,
// not as an element.
func TestStatusPageInChromium(t *testing.T) {
	h := testenv.StartHAProxy(t, haproxyConfig(t))
	// The hostile series is in the servers' family, growing at 5/s.
	data := promData(time.Now()).Rate("datapoints_received_total", fmt.Sprintf("server=%q", hostileSeries), 5)
	prom := testenv.StartPrometheus(t, data.String())
	listen := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	d := startDaemon(t, listen, "--config", writeConfig(t, promConfig(h.Socket, prom.URL, listen)))
	testenv.WaitWithin(t, 20*time.Second, "weights converge", func() bool { return maps.Equal(testenv.Weights(t, h.Socket, "be_ingest"), want) })
	ok := `haproxy_weighter_cycles_total{backend="be_ingest",result="ok"}`
	n := d.metric(ok)
	testenv.WaitWithin(t, 10*time.Second, "a cycle after the write", func() bool { return d.metric(ok) > n })

	dom := testenv.ChromiumDOM(t, d.url+"/")
	for _, s := range servers {
		if re := planRow(s, want[s], want[s], ""); !re.MatchString(dom) {
			t.Errorf("no row matching %s in the DOM:\n%s", re, dom)
		}
	}
	if rows := regexp.MustCompile(`<tbody>(?s:(.*?))</tbody>`).FindStringSubmatch(dom); rows == nil ||
		strings.Count(rows[1], "<tr") != len(servers) || strings.Count(rows[1], "<td") != 11*len(servers) ||
		strings.Count(rows[1], `<svg class="bar"`) != len(servers) {
		t.Errorf("the DOM's server table is not one row of 11 cells and a bar per server:\n%s", dom)
	}
	for _, want := range []string{`<meta http-equiv="refresh" content="2">`, `<a href="/metrics">/metrics</a>`,
		`<a href="/healthz">/healthz</a>`, `<a href="/readyz">/readyz</a>`, `<span class="ok" id="ready">ready</span>`,
		`<h2>be_ingest <span class="badge ok result">ok</span></h2>`, "haproxy on <code>" + h.Socket + "</code>",
		`&lt;img src=x onerror="alert(1)"&gt;`, "<polyline"} {
		if !strings.Contains(dom, want) {
			t.Errorf("no %q in the DOM:\n%s", want, dom)
		}
	}
	// s4 (80 against a mean of 37.5) is the one hot server: its row and bar say so.
	if hot := regexp.MustCompile(`<tr class="load-(hot|warm|ok)[^"]*">\s*<td class="name">(s[0-9])</td>`).FindAllStringSubmatch(dom, -1); len(hot) != len(servers) ||
		hot[3][1] != "hot" || hot[0][1] != "ok" || hot[1][1] != "ok" || hot[2][1] != "ok" {
		t.Errorf("rows by load %v, want s4 alone hot", hot)
	}
	if strings.Contains(dom, "<img") || strings.Contains(dom, "<script") {
		t.Errorf("the DOM has an element the page did not write:\n%s", dom)
	}
	if code := d.stop(); code != 0 {
		t.Errorf("exit code %d after SIGTERM", code)
	}
}

// promtoolCheck runs Prometheus' linter over the daemon's /metrics as served.
func promtoolCheck(t *testing.T, d *daemon) {
	t.Helper()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool not found (apt-get install prometheus): %v", err)
	}
	code, body := d.get("/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics %d", code)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(body)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics on the dry run's /metrics: %v\n%s", err, out)
	}
}
