package daemon

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/haproxy"
	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// TestKernelUnixServerIsMissingNotIdle: a backend of a real HAProxy 2.6
// with three TCP servers and one on a unix socket (`server s4 unix@…`),
// each carrying a connection that writes the same bytes. The kernel's
// socket table has no address for s4 (show servers state: "-"): its fast
// reading is missing, not 0 B/s, so `once` keeps its weight and share (the
// plan says why) instead of raising it as the idlest server, which it did
// (s4 -:0 load=0 219->256 … fast 0 B/s / 1 sess).
func TestKernelUnixServerIsMissingNotIdle(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s4.sock")
	startUnixDiscard(t, sock)
	var ports [4]int
	binds, uses := "", ""
	for i := range ports {
		ports[i] = testenv.FreePort(t)
		binds += fmt.Sprintf("  bind 127.0.0.1:%d\n", ports[i])
		uses += fmt.Sprintf("  use-server s%d if { dst_port %d }\n", i+1, ports[i])
	}
	h := testenv.StartHAProxy(t, testenv.HAProxyDefaults+fmt.Sprintf(`
frontend fe
%s  option contstats
  default_backend be
backend be
  balance roundrobin
%s  server s1 %s weight 100
  server s2 %s weight 100
  server s3 %s weight 100
  server s4 unix@%s weight 100
`, binds, uses, testenv.StartDiscardServer(t), testenv.StartDiscardServer(t), testenv.StartDiscardServer(t), sock))
	for _, p := range ports {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", p), 5*time.Second)
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		testenv.WriteEvery(t, c, 2000, 20*time.Millisecond)
	}
	hc, err := haproxy.New(haproxy.Config{Socket: h.Socket})
	require.NoError(t, err)
	testenv.WaitWithin(t, 10*time.Second, "a session on each server", func() bool {
		stats, err := hc.Stats(testenv.Context(t, 5*time.Second), "be")
		require.NoError(t, err)
		n := 0
		for _, s := range stats {
			if s.CurrentSessions == 1 {
				n++
			}
		}
		return n == 4
	})

	got, err := New(kernelConfig(t, h.Socket, ""), Options{}).RunOnce(testenv.Context(t, 30*time.Second), false)
	require.NoError(t, err)
	require.Len(t, got, 1)
	c := got[0]
	require.NoError(t, c.Err)
	require.NotNil(t, c.Signal)
	assert.Equal(t, "kernel", c.Signal.Reader)
	assert.Equal(t, weighter.FastLive, c.Signal.Fast)
	plan := map[string]weighter.ServerPlan{}
	before, after := 0, 0
	for _, s := range c.Plan.Servers {
		t.Logf("%s %s load=%.4g %d->%d %s: %s", s.Server, s.Address, s.Load, s.Current, s.New, s.Action, s.Reason)
		plan[s.Server] = s
		before += s.Current
		after += s.New
	}
	s4 := plan["s4"]
	assert.NotContains(t, c.Signal.Servers, "s4", "s4 has a fast load")
	assert.Contains(t, c.Signal.Unread, "s4")
	assert.Contains(t, s4.Reason, weighter.ReasonMissing)
	assert.Contains(t, s4.Reason, "fast signal could not read it: no IP address")
	// Its share of the backend's weight does not grow (½ of a weight of
	// rounding allowed).
	assert.LessOrEqual(t, float64(s4.New)/float64(after), (float64(s4.Current)+0.5)/float64(before),
		"s4's share grew on a reading it does not have")
	for _, name := range []string{"s1", "s2", "s3"} {
		assert.Contains(t, c.Signal.Servers, name, "a TCP server has no fast load")
	}

	// Run: the log says so once, at info, and s4 is never raised above
	// the others (they carry the same bytes).
	var logs testenv.SyncBuffer
	reg := prometheus.NewRegistry()
	runDaemon(t, New(kernelConfig(t, h.Socket, ""), Options{Registry: reg,
		Log: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))}))
	cycles := func() float64 {
		v, _ := seriesValue(t, reg, "haproxy_weighter_cycles_total", map[string]string{"backend": "be", "result": "ok"})
		return v
	}
	for cycles() < 6 {
		w := testenv.Weights(t, h.Socket, "be")
		require.LessOrEqual(t, w["s4"], max(w["s1"], w["s2"], w["s3"]), "s4 raised above the servers it carries as much as: %v", w)
		time.Sleep(50 * time.Millisecond)
	}
	assert.Equal(t, 1, strings.Count(logs.String(), `msg="fast signal cannot read some servers"`), logs.String())
	assert.Contains(t, logs.String(), `unread="\"s4\"" unread_why="no IP address the socket table can show`)
}

// startUnixDiscard listens on a unix socket at path and reads each
// connection to EOF until the test ends: a server HAProxy reaches at
// unix@path.
func startUnixDiscard(t *testing.T, path string) {
	t.Helper()
	ln, err := net.Listen("unix", path)
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(io.Discard, c); c.Close() }()
		}
	}()
}

// TestKernelNoIPAddressReadsShowSess: a backend whose every server is on a
// unix socket gives the socket table nothing to read: the kernel reader
// says why in words and the chain reads show sess all, which names each
// stream's server, so the servers are weighed rather than all missing.
func TestKernelNoIPAddressReadsShowSess(t *testing.T) {
	dir := t.TempDir()
	front := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	cfg := testenv.HAProxyDefaults + fmt.Sprintf("frontend fe\n  bind %s\n  default_backend be\nbackend be\n  balance leastconn\n", front)
	for _, s := range []string{"s1", "s2"} {
		sock := filepath.Join(dir, s+".sock")
		startUnixDiscard(t, sock)
		cfg += fmt.Sprintf("  server %s unix@%s weight 100\n", s, sock)
	}
	h := testenv.StartHAProxy(t, cfg)
	for range 2 {
		c, err := net.DialTimeout("tcp", front, 5*time.Second)
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		testenv.WriteEvery(t, c, 2000, 20*time.Millisecond)
		time.Sleep(50 * time.Millisecond) // leastconn: one each
	}
	var logs testenv.SyncBuffer
	got, err := New(kernelConfig(t, h.Socket, ""), Options{Log: slog.New(slog.NewTextHandler(&logs, nil))}).
		RunOnce(testenv.Context(t, 30*time.Second), false)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.NotNil(t, got[0].Signal)
	t.Log(logs.String())
	assert.Equal(t, "sessions", got[0].Signal.Reader)
	assert.Empty(t, got[0].Signal.Unread)
	for _, s := range got[0].Plan.Servers {
		assert.Contains(t, s.Reason, "; reader sessions", "server %s", s.Server)
	}
	assert.Contains(t, logs.String(), `msg="fast signal reader failing"`)
	assert.Contains(t, logs.String(), `reader=kernel reason="no server has an IP address in it: unix@ or abns@ servers, or addresses not resolved yet" next=sessions retry_every=1m0s`)
}
