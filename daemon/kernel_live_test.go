package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/config"
	"github.com/haproxy-weighter/haproxy-weighter/haproxy"
	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
)

// seriesValue returns the gauge name{labels} of reg, and whether it exists.
func seriesValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if got[k] != v {
					continue next
				}
			}
			if m.GetGauge() != nil {
				return m.GetGauge().GetValue(), true
			}
			return m.GetCounter().GetValue(), true
		}
	}
	return 0, false
}

// kernelConfig is a daemon configuration of backend be on socket, weighed
// by the fast signal with `show stat` bytes_in as the fallback source.
func kernelConfig(t *testing.T, socket, extra string) *config.Config {
	t.Helper()
	yml := fmt.Sprintf("listen: \"\"\ninterval: 1s\njitter: 0\nhaproxy: {socket: %s}\nbackends:\n  - name: be\n"+
		"    source: {haproxy: {counter: bytes_in}}\n%s", socket, extra)
	cfg, err := config.Parse("kernel.yml", []byte(yml), nil)
	require.NoError(t, err)
	return cfg
}

// runDaemon runs d until the test ends.
func runDaemon(t *testing.T, d *Daemon) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- d.Run(ctx, nil) }()
	t.Cleanup(func() {
		stop()
		if err := <-ran; err != nil {
			t.Errorf("daemon: %v", err)
		}
	})
}

// TestKernelPathIsTheDefault: a configuration that says nothing of the fast
// signal weighs an HAProxy backend by the kernel's socket table: the reader
// metric and the plan's reason say so, the weights follow the traffic (s1's
// connections carry ten times s2's), and HAProxy is never sent `show sess`
// in any form, cycle after cycle (counted on the socket).
func TestKernelPathIsTheDefault(t *testing.T) {
	h := testenv.StartTwoServers(t, [2]string{testenv.StartDiscardServer(t), testenv.StartDiscardServer(t)}, "weight 100")
	for range 2 {
		h.Client(t, 2000, 20*time.Millisecond) // s1, then s2, by leastconn
		h.Client(t, 200, 20*time.Millisecond)
	}
	counted := testenv.StartCommandCounter(t, h.Socket)
	var logs testenv.SyncBuffer
	reg := prometheus.NewRegistry()
	d := New(kernelConfig(t, counted.Socket, ""), Options{Registry: reg,
		Log: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	runDaemon(t, d)

	be := map[string]string{"backend": "be"}
	defer func() {
		if t.Failed() {
			t.Log(logs.String())
		}
	}()
	testenv.WaitWithin(t, 30*time.Second, "s1's weight below s2's", func() bool {
		w := testenv.Weights(t, h.Socket, "be")
		return w["s1"] < w["s2"]
	})
	cycles := func() float64 {
		v, _ := seriesValue(t, reg, "haproxy_weighter_cycles_total", map[string]string{"backend": "be", "result": "ok"})
		return v
	}
	start := cycles()
	testenv.WaitWithin(t, 30*time.Second, "five more cycles", func() bool { return cycles() >= start+5 })
	for reader, want := range map[string]float64{"kernel": 1, "sessions": 0, "stat": 0, "none": 0} {
		v, ok := seriesValue(t, reg, "haproxy_weighter_fast_signal_reader", map[string]string{"backend": "be", "reader": reader})
		assert.True(t, ok, "no fast_signal_reader{reader=%s}", reader)
		assert.Equal(t, want, v, "fast_signal_reader{reader=%s}", reader)
	}
	live, _ := seriesValue(t, reg, "haproxy_weighter_fast_signal_state", map[string]string{"backend": "be", "state": "live"})
	assert.Equal(t, 1.0, live, "fast_signal_state{state=live}")
	_, streams := seriesValue(t, reg, "haproxy_weighter_fast_signal_streams", be)
	assert.False(t, streams, "fast_signal_streams is a dump's; the kernel path makes none")
	w := testenv.Weights(t, h.Socket, "be")
	t.Logf("weights %v after %v cycles; commands sent: %d show servers state, %d show info, %d show sess",
		w, cycles(), counted.Count("show servers state"), counted.Count("show info"), counted.Count("show sess"))
	assert.Zero(t, counted.Count("show sess"), "HAProxy was sent show sess on the kernel path")
	assert.Less(t, w["s1"], w["s2"])
	assert.Contains(t, logs.String(), `msg="weighting by the fast signal" backend=be reader=kernel ownership=inode`)
	assert.NotContains(t, logs.String(), "cannot be read")
	assert.NotContains(t, logs.String(), "reader failing")

	// once says in each server's reason what was read.
	ctx := testenv.Context(t, 30*time.Second)
	got, err := New(kernelConfig(t, h.Socket, ""), Options{}).RunOnce(ctx, false)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.NotNil(t, got[0].Signal)
	assert.Equal(t, "kernel", got[0].Signal.Reader)
	for _, s := range got[0].Plan.Servers {
		assert.Contains(t, s.Reason, "; reader kernel", "server %s", s.Server)
	}
}

// TestKernelShedFindsTheStream: shedding on the kernel path chooses by the
// socket table's per-connection rates and closes the right stream (the
// whale's, found by its server-side 4-tuple) while HAProxy is sent a
// stream dump only when a server has been hot for for-1 cycles, not every
// cycle.
func TestKernelShedFindsTheStream(t *testing.T) {
	front, hcfg, servers := shedBackendConfig(t)
	h := testenv.StartHAProxy(t, hcfg)
	hc, err := haproxy.New(haproxy.Config{Socket: h.Socket})
	require.NoError(t, err)
	hb := hc.Backend("be")
	// As TestShedMovesTheWhale: the whale and 19 ordinary clients on one
	// server, 20 on two others, none on the last.
	sc := openWhaleScene(t, front, hb, servers)
	whale, whaleStream, hot, staying := sc.whale, sc.whaleStream, sc.hot, sc.staying

	counted := testenv.StartCommandCounter(t, h.Socket)
	var logs testenv.SyncBuffer
	reg := prometheus.NewRegistry()
	const forCycles = 3
	d := New(kernelConfig(t, counted.Socket, fmt.Sprintf(
		"    shed: {above: 2.2, for: %d, max_per_minute: 2, max_share: 0.02, min_age: 1s, cooldown: 2m, progress: 0.2}\n", forCycles)),
		Options{Registry: reg, Log: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	runDaemon(t, d)
	select {
	case <-whale.Done:
	case <-time.After(30 * time.Second):
		t.Fatalf("the whale was not shed within 30 s; shedding said:\n%s", recordsText(shedRecords(t, &logs)))
	}
	var recs []shedRecord
	shedAt := -1
	testenv.WaitFor(t, "the shed in the log", func() bool {
		recs = shedRecords(t, &logs)
		for i, r := range recs {
			if r.Msg == "session shed" {
				shedAt = i
				return true
			}
		}
		return false
	})
	shed := recs[shedAt]
	t.Logf("shed in cycle %d: %s; before it:\n%s", shedAt+1, shed.Reason, recordsText(recs[:shedAt]))
	assert.Equal(t, whaleStream.ID, shed.Session)
	assert.Equal(t, whaleStream.Client, shed.Client)
	assert.Equal(t, hot, shed.Server)
	for i, c := range staying {
		assert.False(t, c.Closed.Load(), "ordinary client %d was closed", i)
	}
	v, _ := seriesValue(t, reg, "haproxy_weighter_fast_signal_reader", map[string]string{"backend": "be", "reader": "kernel"})
	assert.Equal(t, 1.0, v, "the shed was planned on the kernel path")

	// Streams were read only once a server had been hot for for-1 cycles:
	// at most the cycles from then to the shed, never from the first cycle.
	dumps := counted.Count("show sess all")
	hotBefore := 0
	for _, r := range recs[:shedAt] {
		if strings.Contains(r.Reason, fmt.Sprintf("for %d of %d cycles", forCycles-1, forCycles)) {
			hotBefore++
		}
	}
	t.Logf("%d stream dumps (%d cycles to the shed; %d at for-1 of %d); show sess commands: %d", dumps, shedAt+1, hotBefore, forCycles, counted.Count("show sess"))
	assert.GreaterOrEqual(t, dumps, 1, "the whale's stream was found without reading HAProxy's streams?")
	assert.LessOrEqual(t, dumps, hotBefore+1)
	assert.Less(t, dumps, shedAt+1, "a stream dump every cycle")
}

// TestKernelPathOnEveryVersion: on every HAProxy version a Debian user has,
// once reads the fast signal from the kernel's socket table and finds it
// live (the servers' addresses from show servers state and HAProxy's pid
// from show info read the same on each).
func TestKernelPathOnEveryVersion(t *testing.T) {
	for _, version := range testenv.HAProxyVersions() {
		t.Run(version, func(t *testing.T) {
			front := testenv.FreePort(t)
			h := testenv.StartHAProxyVersion(t, version, testenv.HAProxyDefaults+fmt.Sprintf(`
frontend fe
  bind 127.0.0.1:%d
  default_backend be
backend be
  balance leastconn
  server s1 %s weight 100
  server s2 %s weight 100
`, front, testenv.StartDiscardServer(t), testenv.StartDiscardServer(t)))
			for range 4 {
				c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", front))
				require.NoError(t, err)
				t.Cleanup(func() { c.Close() })
				testenv.WriteEvery(t, c, 500, 20*time.Millisecond)
				time.Sleep(50 * time.Millisecond)
			}
			got, err := New(kernelConfig(t, h.Socket, ""), Options{}).RunOnce(testenv.Context(t, 30*time.Second), false)
			require.NoError(t, err)
			require.Len(t, got, 1)
			require.NotNil(t, got[0].Signal)
			assert.Equal(t, "kernel", got[0].Signal.Reader, "HAProxy %s", version)
			assert.Equal(t, "live", string(got[0].Signal.Fast), "HAProxy %s: %s", version, got[0].Signal.FastReason)
			for name, in := range got[0].Signal.Servers {
				assert.Positive(t, in.Local, "HAProxy %s: %s's bytes", version, name)
			}
		})
	}
}
