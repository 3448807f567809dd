package testenv

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// errorTB records Errorf and Fatalf instead of failing the real test.
type errorTB struct {
	testing.TB
	mu     sync.Mutex
	errors []string
	fatal  string
}

func (e *errorTB) Helper() {}

func (e *errorTB) Errorf(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.errors = append(e.errors, fmt.Sprintf(format, args...))
}

func (e *errorTB) Fatalf(format string, args ...any) {
	e.mu.Lock()
	e.fatal = fmt.Sprintf(format, args...)
	e.mu.Unlock()
	panic(e) // stops the helper as Fatalf would; recovered by fails
}

// fails runs f with an errorTB and returns it once f has returned or failed.
func fails(t *testing.T, f func(tb testing.TB)) *errorTB {
	e := &errorTB{TB: t}
	func() {
		defer func() {
			if r := recover(); r != nil && r != any(e) {
				panic(r)
			}
		}()
		f(e)
	}()
	return e
}

// A wait that never comes true fails the test, saying what it waited for.
func TestWaitWithinFailsOnTimeout(t *testing.T) {
	calls := 0
	e := fails(t, func(tb testing.TB) {
		WaitWithin(tb, 30*time.Millisecond, "the impossible", func() bool { calls++; return false })
	})
	assert.Equal(t, "timed out after 30ms waiting for the impossible", e.fatal)
	assert.Greater(t, calls, 1, "cond polled more than once")

	e = fails(t, func(tb testing.TB) { WaitWithin(tb, time.Second, "now", func() bool { return true }) })
	assert.Empty(t, e.fatal, "a condition that holds passes")
}

func TestClockWaitsUntilFired(t *testing.T) {
	c := NewClock()
	start := c.Now()
	c.Advance(90 * time.Second)
	assert.Equal(t, start.Add(90*time.Second), c.Now())
	c.Set(start)
	assert.Equal(t, start, c.Now())

	got := make(chan time.Time)
	go func() { got <- <-c.After(time.Minute) }()
	assert.Equal(t, time.Minute, <-c.Waits(), "After's duration is what Waits yields")
	c.Advance(time.Minute)
	c.Fire()
	assert.Equal(t, start.Add(time.Minute), <-got, "Fire delivers the clock's time")
}

func TestPromData(t *testing.T) {
	start := time.Unix(1_800_000_000, 0)
	got := PromSamples(start, 15*time.Second, 3).
		Type("rx", "counter").Rate("rx_total", `server="a"`, 2).
		Type("load", "gauge").Constant("load", `server="a",shard="b"`, math.NaN()).
		String()
	assert.Equal(t, `# TYPE rx counter
rx_total{server="a"} 0 1800000000
rx_total{server="a"} 30 1800000015
rx_total{server="a"} 60 1800000030
# TYPE load gauge
load{server="a",shard="b"} NaN 1800000000
load{server="a",shard="b"} NaN 1800000015
load{server="a",shard="b"} NaN 1800000030
# EOF
`, got)

	hour := PromHour(time.Unix(1_800_000_100, 0), 5*time.Second).Type("g", "gauge").Constant("g", `s="1"`, 1).String()
	lines := strings.Split(strings.TrimSpace(hour), "\n")
	require.Len(t, lines, 2+721, "an hour every 5 s, both ends included")
	assert.Equal(t, `g{s="1"} 1 1799998260`, lines[1], "30 minutes before now's minute")
	assert.Equal(t, `g{s="1"} 1 1800001860`, lines[721], "30 minutes after it")
}

func TestAssertNoSecretNamesEachLeak(t *testing.T) {
	text := strings.Repeat("x", 300) + "token=s3cret&pw=hunter2" + strings.Repeat("y", 300)
	e := fails(t, func(tb testing.TB) { AssertNoSecret(tb, "the log", text, "s3cret", "absent", "hunter2") })
	require.Len(t, e.errors, 2, "%q", e.errors)
	assert.Contains(t, e.errors[0], `the log shows the secret "s3cret"`)
	assert.Contains(t, e.errors[0], "token=s3cret", "the text around the leak")
	assert.Less(t, len(e.errors[0]), 400, "an excerpt, not the whole text")
	assert.Contains(t, e.errors[1], `"hunter2"`)

	e = fails(t, func(tb testing.TB) { AssertNoSecret(tb, "the log", text, "absent") })
	assert.Empty(t, e.errors)
}

// The weights come from the columns the header names: the capture of
// HAProxy 2.6's reply and a reply whose columns are in another order.
func TestParseWeights(t *testing.T) {
	captured, err := os.ReadFile(filepath.Join("..", "..", "testdata", "haproxy-2.6.12", "show-servers-state.txt"))
	require.NoError(t, err)
	w, err := ParseWeights(string(captured))
	require.NoError(t, err)
	assert.NotEmpty(t, w)
	assert.Equal(t, 100, w["s1"])

	w, err = ParseWeights("1\n# srv_uweight be_name srv_name\n7 be a\n0 be b\n")
	require.NoError(t, err)
	assert.Equal(t, map[string]int{"a": 7, "b": 0}, w)

	for _, bad := range []string{"", "Can't find backend.\n", "1\n# be_name srv_name\nbe a\n", "1\n# srv_name srv_uweight\na x\n", "1\n# srv_name srv_uweight\na\n"} {
		_, err := ParseWeights(bad)
		assert.Error(t, err, "%q", bad)
	}
}

// Weights reads what HAProxy has, also after a runtime change.
func TestWeightsOfARealHAProxy(t *testing.T) {
	h := StartHAProxy(t, HAProxyDefaults+fmt.Sprintf(`
backend be
  balance roundrobin
  server s1 127.0.0.1:%d weight 10
  server s2 127.0.0.1:%d weight 20
`, FreePort(t), FreePort(t)))
	assert.Equal(t, map[string]int{"s1": 10, "s2": 20}, Weights(t, h.Socket, "be"))
	assert.Empty(t, strings.TrimSpace(Command(t, h.Socket, "set weight be/s2 7")))
	assert.Equal(t, map[string]int{"s1": 10, "s2": 7}, Weights(t, h.Socket, "be"))
	_, err := ReadWeights(h.Socket, "nope")
	assert.Error(t, err, "a backend HAProxy does not have")
}

// Two clients of TwoServers land one on each server and carry their bytes.
func TestTwoServersSpreadsClients(t *testing.T) {
	b := StartTwoServers(t, [2]string{StartDiscardServer(t), StartDiscardServer(t)}, "weight 100")
	b.Client(t, 100, 10*time.Millisecond)
	b.Client(t, 100, 10*time.Millisecond)
	WaitFor(t, "one session on each server", func() bool {
		stat := Command(t, b.Socket, "show stat be 4 -1")
		return scur(t, stat, "s1") == 1 && scur(t, stat, "s2") == 1
	})
}

// scur is a server's current sessions in `show stat` CSV.
func scur(t *testing.T, csv, server string) int {
	t.Helper()
	lines := strings.Split(csv, "\n")
	cols := strings.Split(strings.TrimPrefix(lines[0], "# "), ",")
	at := -1
	for i, c := range cols {
		if c == "scur" {
			at = i
		}
	}
	require.GreaterOrEqual(t, at, 0, "no scur column: %q", lines[0])
	for _, l := range lines[1:] {
		f := strings.Split(l, ",")
		if len(f) > at && f[1] == server {
			var n int
			_, err := fmt.Sscan(f[at], &n)
			require.NoError(t, err)
			return n
		}
	}
	return -1
}

// Counter sums the series its labels select; Gauge tells a missing series
// (NaN) from one at 0; Exposition is the text format.
func TestMetricReaders(t *testing.T) {
	reg := prometheus.NewRegistry()
	cycles := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cycles_total", Help: "h"}, []string{"backend", "result"})
	up := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "up", Help: "h"}, []string{"socket"})
	reg.MustRegister(cycles, up)
	cycles.WithLabelValues("a", "ok").Add(3)
	cycles.WithLabelValues("a", "error").Add(2)
	cycles.WithLabelValues("b", "ok").Add(7)
	up.WithLabelValues("/s").Set(0)

	assert.Equal(t, 3.0, Counter(t, reg, "cycles_total", map[string]string{"backend": "a", "result": "ok"}))
	assert.Equal(t, 5.0, Counter(t, reg, "cycles_total", map[string]string{"backend": "a"}))
	assert.Equal(t, 12.0, Counter(t, reg, "cycles_total", nil))
	assert.Zero(t, Counter(t, reg, "cycles_total", map[string]string{"backend": "c"}))
	assert.Len(t, Series(t, reg, "cycles_total", map[string]string{"result": "ok"}), 2)
	assert.Equal(t, map[string]string{"socket": "/s"}, Labels(Series(t, reg, "up", nil)[0]))

	assert.Equal(t, 0.0, Gauge(t, reg, "up", map[string]string{"socket": "/s"}))
	assert.True(t, math.IsNaN(Gauge(t, reg, "up", map[string]string{"socket": "/other"})))
	assert.Contains(t, Exposition(t, reg), `cycles_total{backend="b",result="ok"} 7`)
}
