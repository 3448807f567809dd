package haproxy

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/duration"
	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// masterConfig is appConfig plus be_live, fed by frontend fe_live on port.
func masterConfig(t *testing.T, port int) string {
	return appConfig(t) + fmt.Sprintf(`
frontend fe_live
  bind 127.0.0.1:%d
  default_backend be_live
backend be_live
  server l1 %s
`, port, testenv.StartDiscardServer(t))
}

// Through a real master CLI (`haproxy -W -S`, no stats socket), the client
// reads, writes and checks as through a worker's socket, with the same
// errors, and reads the fast signal; after a reload (USR2) the same client
// reads and writes the new worker.
func TestMasterCLI(t *testing.T) {
	port := testenv.FreePort(t)
	h := testenv.StartHAProxyMaster(t, masterConfig(t, port))
	c, err := New(Config{Socket: h.Socket, Master: true, Timeout: duration.Duration(5 * time.Second)})
	require.NoError(t, err)
	ctx := testCtx(t)
	b := c.Backend("be_app")

	got := byName(t, b)
	require.Len(t, got, 4)
	assert.Equal(t, 1, got["s1"].Weight)
	assert.Equal(t, 20, got["s2"].Weight)
	assert.Equal(t, weighter.AdminMaint, got["s3"].Admin)
	require.NoError(t, b.Check(ctx))
	want := []weighter.Change{{Server: "s1", Weight: 7}, {Server: "s2", Weight: 256}, {Server: "s4", Weight: 1}}
	require.NoError(t, b.SetWeights(ctx, want))
	got = byName(t, b)
	for _, ch := range want {
		assert.Equal(t, ch.Weight, got[ch.Server].Weight, ch.Server)
	}

	// The master passes errors on without their severity: they are errors all the same.
	_, err = c.Backend("nope").Servers(ctx)
	require.ErrorIs(t, err, ErrNoBackend)
	require.ErrorIs(t, c.Backend("nope").Check(ctx), ErrNoBackend)
	_, err = c.Stats(ctx, "nope")
	require.ErrorIs(t, err, ErrNoBackend)
	err = b.SetWeights(ctx, []weighter.Change{{Server: "s1", Weight: 5}, {Server: "ghost", Weight: 5}})
	require.ErrorIs(t, err, ErrNoServer)
	var se *weighter.ServerError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, "ghost", se.Server)
	assert.Equal(t, 5, byName(t, b)["s1"].Weight, "the other server of the batch is written")
	require.ErrorIs(t, c.Backend("be_static").Check(ctx), ErrStaticWeights)
	require.ErrorIs(t, c.Backend("be_map").Check(ctx), ErrStaticWeights)

	// The fast signal: `show sess all` of the current worker.
	live := c.Backend("be_live")
	q := LocalQuery{Servers: []string{"l1"}}
	conn := dialFront(t, port)
	base := waitLocal(t, live, q, func(r StreamsReading) bool { return r.OpenAt["l1"] == 1 })
	write(t, conn, 12_345)
	r := waitLocal(t, live, q, func(r StreamsReading) bool { return r.Servers["l1"].Bytes-base.Servers["l1"].Bytes >= 12_345 })
	assert.Equal(t, float64(12_345), r.Servers["l1"].Bytes-base.Servers["l1"].Bytes)

	// A reload: the same client now reads the new worker (weights back to
	// the configuration's) and writes to it.
	old := h.Worker()
	pid := h.Reload()
	require.NotEqual(t, old, pid)
	// The master refuses connections for a moment while it re-executes.
	testenv.WaitFor(t, "the new worker's weights", func() bool {
		servers, err := b.Servers(ctx)
		return err == nil && len(servers) == 4 && servers[0].Name == "s1" && servers[0].Weight == 1
	})
	require.NoError(t, b.SetWeights(ctx, []weighter.Change{{Server: "s1", Weight: 55}}))
	assert.Contains(t, h.Command(fmt.Sprintf("@!%d get weight be_app/s1", pid)), "55 (initial 1)", "written to the new worker")
	if !strings.Contains(h.Command("show proc"), "# old workers") {
		// The old worker may already be gone (no stream kept it): nothing to compare.
		return
	}
	assert.NotContains(t, h.Command(fmt.Sprintf("@!%d get weight be_app/s1", old)), "55", "the old worker untouched")
}

// The wrong kind of socket for the setting is named as such.
func TestMasterSettingMismatch(t *testing.T) {
	h := testenv.StartHAProxy(t, appConfig(t))
	c, err := New(Config{Socket: h.Socket, Master: true, Timeout: duration.Duration(5 * time.Second)})
	require.NoError(t, err)
	_, err = c.Backend("be_app").Servers(testCtx(t))
	require.ErrorIs(t, err, ErrBadReply)
	assert.Contains(t, err.Error(), "not the master CLI: set master: false")

	m := testenv.StartHAProxyMaster(t, appConfig(t))
	c, err = New(Config{Socket: m.Socket, Timeout: duration.Duration(5 * time.Second)})
	require.NoError(t, err)
	_, err = c.Backend("be_app").Servers(testCtx(t))
	require.ErrorIs(t, err, ErrBadReply)
	assert.Contains(t, err.Error(), "this is HAProxy's master CLI: set master: true")
}

// A batch of 1,000 weights goes through the master CLI in one exchange,
// every weight written and read back.
func TestMasterCLIBigBatch(t *testing.T) {
	const n = 1000
	h := testenv.StartHAProxyMaster(t, bigConfig(n))
	c, err := New(Config{Socket: h.Socket, Master: true, Timeout: duration.Duration(5 * time.Second)})
	require.NoError(t, err)
	b := c.Backend("be_big")
	changes := make([]weighter.Change, n)
	for i := range changes {
		changes[i] = weighter.Change{Server: fmt.Sprintf("s%d", i), Weight: 1 + i%256}
	}
	start := time.Now()
	require.NoError(t, b.SetWeights(testCtx(t), changes))
	t.Logf("%d weights through the master CLI in %s", n, time.Since(start))
	got := byName(t, b)
	for _, ch := range changes {
		require.Equal(t, ch.Weight, got[ch.Server].Weight, ch.Server)
	}
}

// BenchmarkSetWeights1000MasterCLI is BenchmarkSetWeights1000's batched
// write through the master CLI: one connection to the master, which opens a
// session on the worker for each command.
func BenchmarkSetWeights1000MasterCLI(b *testing.B) {
	h := testenv.StartHAProxyMaster(b, bigConfig(1000))
	c, err := New(Config{Socket: h.Socket, Master: true, Timeout: duration.Duration(5 * time.Second)})
	if err != nil {
		b.Fatal(err)
	}
	be := c.Backend("be_big")
	plans := [2][]weighter.Change{}
	for i := range 1000 {
		plans[0] = append(plans[0], weighter.Change{Server: fmt.Sprintf("s%d", i), Weight: 1 + i%256})
		plans[1] = append(plans[1], weighter.Change{Server: fmt.Sprintf("s%d", i), Weight: 256 - i%256})
	}
	i := 0
	for b.Loop() {
		if err := be.SetWeights(context.Background(), plans[i%2]); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/1000-servers")
}
