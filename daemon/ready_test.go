package daemon

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"

	"github.com/haproxy-weighter/haproxy-weighter/config"
	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
)

// TestReloadKeepsReadiness: a SIGHUP must not turn /readyz to 503 (and
// haproxy_weighter_ready to 0) until every backend has cycled again — with the
// HAProxy stats source that is a whole rate_window. A backend that was ready
// before the reload is still ready after it.
func TestReloadKeepsReadiness(t *testing.T) {
	same := testConfig(t, "be")
	n := &recordingNotifier{ready: make(chan struct{})}
	d := New(testConfig(t, "be"), Options{Notifier: n,
		Reload: func() (*config.Config, error) { return same, nil }})
	run := startDaemon(t, d, n)

	first := d.current()
	r := first.runners[0]
	r.mu.Lock()
	r.lastOK = d.clock.Now() // its last cycle was ok (nothing answers on the test socket)
	r.mu.Unlock()
	if ok, why := d.Ready(); !ok {
		t.Fatalf("not ready before the reload: %s", why)
	}
	run.hup <- os.Interrupt
	testenv.WaitFor(t, "reload", func() bool { return d.current() != first })
	if ok, why := d.Ready(); !ok {
		t.Errorf("a reload made a ready daemon unready: %s", why)
	}
}

// TestScrapeSeesReadinessExpire: haproxy_weighter_ready must say what /readyz
// says at scrape time, also when no cycle ends any more (a wedged loop, or
// every cycle hanging until its timeout) to recompute it.
func TestScrapeSeesReadinessExpire(t *testing.T) {
	f := newFixture(t)
	reg := prometheus.NewRegistry()
	d := New(testConfig(t, "be"), Options{Clock: f.clock, Registry: reg})
	d.group = &group{runners: []*runner{f.r}}
	f.r.after = d.updateReady
	if c := f.r.step(context.Background()); c.Result != "ok" {
		t.Fatalf("cycle: %s %v", c.Result, c.Err)
	}
	h := d.handler(reg)
	if got := scrapeReady(t, h); got != "1" {
		t.Fatalf("ready %s after an ok cycle, want 1", got)
	}
	f.clock.Advance(time.Hour) // no cycle for an hour
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	if rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz %d after an hour without a cycle", rec.Code)
	}
	if got := scrapeReady(t, h); got != "0" {
		t.Errorf("haproxy_weighter_ready %s while /readyz answers 503", got)
	}
}

func scrapeReady(t *testing.T, h http.Handler) string {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	for line := range strings.Lines(rec.Body.String()) {
		if v, ok := strings.CutPrefix(line, "haproxy_weighter_ready "); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("no haproxy_weighter_ready in /metrics:\n%s", rec.Body.String())
	return ""
}

// TestHealthzFailsWhenALoopIsStuck: in a container there is no systemd
// watchdog; the liveness probe (/healthz) is what restarts a daemon whose
// backend loop is wedged, so it must fail exactly when WATCHDOG=1 would stop,
// and not because cycles fail.
func TestHealthzFailsWhenALoopIsStuck(t *testing.T) {
	f := newFixture(t)
	d := New(testConfig(t, "be"), Options{Clock: f.clock})
	d.group = &group{runners: []*runner{f.r}}
	h := d.handler(prometheus.NewRegistry())
	healthz := func() (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
		return rec.Code, rec.Body.String()
	}
	f.src.setErr(errors.New("connection refused"))
	f.r.step(context.Background())
	if code, body := healthz(); code != http.StatusOK {
		t.Fatalf("/healthz %d %q while the loop turns (its cycles fail)", code, body)
	}
	f.clock.Advance(time.Hour) // no cycle ended for an hour (2 intervals + timeout is 30s)
	if code, body := healthz(); code != http.StatusServiceUnavailable || !strings.Contains(body, "be") {
		t.Errorf("/healthz %d %q with a stuck loop, want 503 naming the backend", code, body)
	}
}

// TestOverrunIsNotStuck: a batch of weights once sent is finished up to
// haproxy.timeout past the cycle's deadline; the watchdog and readiness
// allow for it, so such a cycle is not called stuck nor flaps /readyz.
func TestOverrunIsNotStuck(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	r := &runner{timing: Timing{Interval: time.Second, Timeout: time.Second}, lastBeat: t0, lastOK: t0}
	late := t0.Add(3*time.Second + 1500*time.Millisecond) // 2 intervals + the timeout + 1.5 s of a batch finishing
	assert.False(t, r.alive(late), "without an overrun the loop is stuck")
	r.timing.Overrun = 2 * time.Second
	assert.True(t, r.alive(late), "a batch finishing within haproxy.timeout is not stuck")
	assert.True(t, r.readyLocked(t0.Add(3*time.Second+900*time.Millisecond)))
}
