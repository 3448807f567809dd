package peers

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
)

// A peer left out for the same reason at every ask, worded with other
// numbers each time (its garbage values, a connection's local port), is
// said once, not at every poll: four lines an interval per peer for as long
// as it lasts.
func TestPeerSameProblemOtherNumbersLoggedOnce(t *testing.T) {
	var asks atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		n := asks.Add(1)
		fmt.Fprintf(w, `{"instance":"other","backends":{"be":{"age_seconds":0.1,"span_seconds":1,`+
			`"servers":{"s1":{"bytes_per_second":-%d,"sessions":1}}}}}`, n)
	}))
	t.Cleanup(srv.Close)
	var logs testenv.SyncBuffer
	set := newSet(prometheus.NewRegistry(), slog.New(slog.NewTextHandler(&logs, nil)))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); set.Stop() })
	set.Poll(ctx, []string{srv.URL}, 400*time.Millisecond) // poll 100 ms
	testenv.WaitFor(t, "five asks", func() bool { return asks.Load() >= 5 })
	require.True(t, set.Poll(ctx, nil, 400*time.Millisecond))
	assert.Equal(t, 1, strings.Count(logs.String(), "peer left out"), logs.String())
}

// A peer that flaps (answers about as slowly as the timeout, or one of two
// hosts behind its name is broken) changes at every poll: its changes are
// said a few times, then summarised, with the state it is in, not logged
// at every poll for as long as it flaps. A peer that changes now and then
// still has each change said when it happens.
func TestFlappingPeerIsSummarised(t *testing.T) {
	var asks atomic.Int64
	var settled, down atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if asks.Add(1)%2 == 0 && !settled.Load() || down.Load() {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		fmt.Fprint(w, `{"instance":"other","backends":{}}`)
	}))
	t.Cleanup(srv.Close)
	var clock atomic.Int64
	epoch := time.Unix(2_000_000_000, 0)
	var logs testenv.SyncBuffer
	set := newSet(prometheus.NewRegistry(), slog.New(slog.NewTextHandler(&logs, nil)))
	set.now = func() time.Time { return epoch.Add(time.Duration(clock.Load())) }
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); set.Stop() })
	set.Poll(ctx, []string{srv.URL}, time.Hour) // the poller asks once, then sleeps: the test asks
	pr := set.peers[srv.URL]
	testenv.WaitFor(t, "the first ask", func() bool { return asks.Load() == 1 })
	timing := TimingFor(2 * time.Second)
	lines := func() int { return strings.Count(logs.String(), "peer="+srv.URL) }
	testenv.WaitFor(t, "the first ask's line", func() bool { return lines() == 1 })
	for range 1319 { // a poll every 500 ms for 11 minutes, each a change
		clock.Add(int64(500 * time.Millisecond))
		set.fetch(ctx, pr, timing)
	}
	during := lines()
	assert.LessOrEqual(t, during, 12, "lines while flapping for 11 minutes (1,320 changes):\n%s", logs.String())
	assert.Contains(t, logs.String(), "changes=", "the flapping summarised")

	// It settles (answers 200 from now on): the state it ends in is said.
	settled.Store(true)
	for range 1200 { // 10 minutes
		clock.Add(int64(500 * time.Millisecond))
		set.fetch(ctx, pr, timing)
	}
	all := strings.Split(strings.TrimSpace(logs.String()), "\n")
	assert.Contains(t, all[len(all)-1], "added", "the last word is the state it settled in:\n%s", logs.String())
	assert.LessOrEqual(t, len(all)-during, 2, "lines once settled:\n%s", logs.String())

	// Down again, for good: said at the ask that finds it.
	down.Store(true)
	clock.Add(int64(500 * time.Millisecond))
	set.fetch(ctx, pr, timing)
	all = strings.Split(strings.TrimSpace(logs.String()), "\n")
	assert.Contains(t, all[len(all)-1], "peer left out", logs.String())
}
