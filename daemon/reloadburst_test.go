package daemon

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/config"
	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
)

// reloadRecord is a "config reloaded" line of the JSON log.
type reloadRecord struct {
	Msg       string `json:"msg"`
	Coalesced int    `json:"coalesced_requests"`
}

func reloadRecords(t *testing.T, logs *testenv.SyncBuffer) []reloadRecord {
	t.Helper()
	var out []reloadRecord
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var r reloadRecord
		require.NoError(t, json.Unmarshal([]byte(l), &r), l)
		if r.Msg == "config reloaded" {
			out = append(out, r)
		}
	}
	return out
}

// A burst of 100 SIGHUPs against a daemon weighing a real HAProxy every
// 500 ms: each reload used to cycle its backends at once, 98 extra cycles
// for 100 SIGHUPs in 10 s (100 dumps of HAProxy, and weights moving up to
// max_step at each). The backend must go on cycling on its schedule, no
// more than once an interval over the burst, and the requests coalesce:
// fewer reloads applied than requests, every request answered by one of
// them, which says how many it answered.
func TestReloadBurstCyclesOncePerInterval(t *testing.T) {
	const interval = 500 * time.Millisecond
	h := startTwoServers(t)
	yml := fmt.Sprintf("listen: \"\"\ninterval: %s\njitter: 0\nhaproxy: {socket: %s}\nbackends:\n"+
		"  - name: be\n    source: {haproxy: {counter: bytes_in}}\n", interval, h.Socket)
	parse := func() (*config.Config, error) { return config.Parse("test.yml", []byte(yml), nil) }
	cfg, err := parse()
	require.NoError(t, err)
	timeout := cfg.CycleTimeout()
	logs := &testenv.SyncBuffer{}
	reg := prometheus.NewRegistry()
	n := &recordingNotifier{ready: make(chan struct{})}
	d := New(cfg, Options{Log: slog.New(slog.NewJSONHandler(logs, nil)), Notifier: n, Reload: parse, Registry: reg})
	r := startDaemon(t, d, n)
	testenv.WaitFor(t, "the first cycle", func() bool { return cycles(t, reg, "be", "") >= 1 })

	// A cycle in flight when the burst starts ends in the window: the
	// window starts a cycle timeout earlier.
	begin := time.Now()
	before := int(cycles(t, reg, "be", ""))
	const requests = 100
	for range requests {
		r.hup <- syscall.SIGHUP
		time.Sleep(10 * time.Millisecond) // a burst: ~100 a second, as a script in a loop sends them
	}
	testenv.WaitFor(t, "every request answered by a reload", func() bool {
		sum := 0
		for _, rec := range reloadRecords(t, logs) {
			sum += max(rec.Coalesced, 1)
		}
		return sum == requests
	})
	ran := int(cycles(t, reg, "be", "")) - before
	window := time.Since(begin) + timeout
	bound := int(window/interval) + 1
	reloads := len(reloadRecords(t, logs))
	t.Logf("%d SIGHUPs: %d reloads applied, %d cycles in %s (at most %d at one per %s)",
		requests, reloads, ran, window.Round(time.Millisecond), bound, interval)
	assert.LessOrEqual(t, ran, bound, "cycles over the burst: more than one per interval")
	assert.Less(t, reloads, requests/2, "the reload requests were not coalesced")
	require.NoError(t, r.stop())
}
