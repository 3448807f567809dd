package daemon

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/config"
	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// futurePoints is OpenMetrics for gauge load{server=s1|s2}, one point a
// second for a minute from appear on: a Prometheus backfilled with it has no
// point for the query before appear, and one after, as a Prometheus that
// has not scraped the servers yet when the daemon starts.
func futurePoints(appear time.Time) string {
	d := testenv.PromSamples(appear, time.Second, 60).Type("load", "gauge")
	for _, s := range []string{"s1", "s2"} {
		d.Constant("load", fmt.Sprintf("server=%q", s), 10)
	}
	return d.String()
}

// logRecord is one line of the JSON log, the fields these tests read.
type logRecord struct {
	Level   string `json:"level"`
	Msg     string `json:"msg"`
	Written int    `json:"written"`
	Result  string `json:"result"`
}

func records(t *testing.T, logs *testenv.SyncBuffer) []logRecord {
	t.Helper()
	var out []logRecord
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var r logRecord
		require.NoError(t, json.Unmarshal([]byte(l), &r), l)
		out = append(out, r)
	}
	return out
}

// At start, before Prometheus has a point for the query, the fast signal
// weighs alone from the first cycle: the first cycle used to come right
// after the start-up read, get the same dump of HAProxy back (no rate),
// weigh by the source alone and log ERROR "cycle failed … query returned no
// series", then "cycle ok again". Now: no ERROR, weights written by the
// first cycle, one line saying the calibration waits for the source, and
// one saying it starts when the series appears.
func TestFirstCyclesBeforeTheSourceHasDataWeighByTheFastSignal(t *testing.T) {
	h := testenv.StartTwoServers(t, [2]string{testenv.StartDiscardServer(t), testenv.StartDiscardServer(t)}, "weight 100")
	for range 2 { // leastconn puts one on each server
		h.Client(t, 1000, 100*time.Millisecond)
	}
	prom := testenv.StartPrometheus(t, futurePoints(time.Now().Add(8*time.Second)))
	yml := fmt.Sprintf("listen: \"\"\ninterval: 500ms\nhaproxy: {socket: %s}\nbackends:\n  - name: be\n"+
		"    calibration: {window: 30s, refresh: 1s}\n"+
		"    source: {prometheus: {url: %q, query: 'load', server_label: server}}\n", h.Socket, prom.URL)
	cfg, err := config.Parse("test.yml", []byte(yml), nil)
	require.NoError(t, err)
	logs := &testenv.SyncBuffer{}
	reg := prometheus.NewRegistry()
	n := &recordingNotifier{ready: make(chan struct{})}
	d := New(cfg, Options{Log: slog.New(slog.NewJSONHandler(logs, nil)), Notifier: n, Registry: reg})
	r := startDaemon(t, d, n)
	const starts = "calibration starts"
	require.Eventually(t, func() bool {
		for _, rec := range records(t, logs) {
			if rec.Msg == starts || rec.Msg == "calibrating source back" {
				return true
			}
		}
		return false
	}, 40*time.Second, 50*time.Millisecond, "the series appeared; the log never said the source answers:\n%s", logs)
	require.NoError(t, r.stop())

	count := map[string]int{}
	var cycles []logRecord // the lines a cycle wrote (weights, failures)
	for _, rec := range records(t, logs) {
		count[rec.Msg]++
		assert.NotEqual(t, "ERROR", rec.Level, "%s", logs)
		if rec.Written > 0 || rec.Result != "" {
			cycles = append(cycles, rec)
		}
	}
	require.NotEmpty(t, cycles, logs.String())
	assert.Positive(t, cycles[0].Written, "the first cycle wrote no weight:\n%s", logs)
	assert.Equal(t, 1, count["calibration waiting for the source"], logs.String())
	assert.Equal(t, 1, count[starts], logs.String())
	assert.Zero(t, count["calibrating source failing"], logs.String())
	assert.Zero(t, testenv.Counter(t, reg, "haproxy_weighter_cycles_total", map[string]string{"backend": "be", "result": weighter.ResultSourceError}))
}
