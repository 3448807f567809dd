package daemon

import (
	"syscall"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/config"
	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// TestReloadToAnotherSocketStartsControllerAfresh: a reload that moves a
// backend to another HAProxy's socket must not carry over what the daemon
// wrote to the first one. The other HAProxy's weight 0 is its operator's
// drain, not the drain the daemon set on the first, and stays.
func TestReloadToAnotherSocketStartsControllerAfresh(t *testing.T) {
	build := func(socket string) []*managedBackend {
		return buildUnits(t, "listen: \"\"\nhaproxy: {socket: "+socket+"}\nbackends:\n  - name: be_a\n    source: {haproxy: {counter: bytes_in}}\n")
	}
	old := build("/run/one.sock")
	old[0].Backend.Controller.Commit([]weighter.Change{{Server: "s1", Weight: 0}})

	same := build("/run/one.sock")
	keepControllers(old, same)
	assert.Same(t, old[0].Backend.Controller, same[0].Backend.Controller, "same socket keeps the controller")
	slower := build("/run/one.sock, timeout: 7s")
	keepControllers(old, slower)
	assert.Same(t, old[0].Backend.Controller, slower[0].Backend.Controller, "another timeout on the same socket keeps the controller")

	moved := build("/run/two.sock")
	keepControllers(old, moved)
	assert.NotSame(t, old[0].Backend.Controller, moved[0].Backend.Controller, "another socket starts afresh")

	s1 := planS1AtZero(t, moved[0].Backend.Controller, false)
	assert.Equal(t, weighter.ActionSkip, s1.Action, "weight 0 on the other HAProxy is its operator's drain: %+v", s1)
}

// TestReloadToAnotherSocketRestoresTheFirst: with restore_on_exit, a reload
// that moves a backend to another HAProxy lets go of it on the first, whose
// start-up weights come back at once, and keeps the second's, which come back
// at exit.
func TestReloadToAnotherSocketRestoresTheFirst(t *testing.T) {
	h1 := startFleetHAProxy(t, "be")
	h2 := startFleetHAProxy(t, "be")
	parse := func(socket string) *config.Config { return movingConfig(t, socket, "") }
	weights := func(socket string) map[string]int { return testenv.Weights(t, socket, "be") }
	// No traffic: every load is 0, so each cycle moves both servers up from
	// the configured 10 and 20.
	written := func(socket string) func() bool {
		return func() bool { w := weights(socket); return w["s1"] > 10 && w["s2"] > 20 }
	}
	restored := func(socket string) func() bool {
		return func() bool { w := weights(socket); return w["s1"] == 10 && w["s2"] == 20 }
	}
	n := &recordingNotifier{ready: make(chan struct{})}
	d := New(parse(h1.Socket), Options{Notifier: n, Reload: func() (*config.Config, error) { return parse(h2.Socket), nil }})
	r := startDaemon(t, d, n)
	testenv.WaitFor(t, "weights written to the first HAProxy", written(h1.Socket))

	r.hup <- syscall.SIGHUP
	testenv.WaitFor(t, "the first HAProxy's start-up weights back after the reload", restored(h1.Socket))
	testenv.WaitFor(t, "weights written to the second HAProxy", written(h2.Socket))
	require.NoError(t, r.stop())
	assert.True(t, restored(h2.Socket)(), "the second HAProxy's start-up weights back at exit: %v", weights(h2.Socket))
	assert.True(t, restored(h1.Socket)(), "the first HAProxy left alone after: %v", weights(h1.Socket))
}

// TestReloadKeepsTheSocketsClient: a reload that keeps a socket keeps its
// client, so that the socket's haproxy_weighter_haproxy_socket_up goes on
// (a new client had none until its first exchange) and the backends on it,
// kept or new, share one `show sess all` per cycle, not one per client.
func TestReloadKeepsTheSocketsClient(t *testing.T) {
	h := startFleetHAProxy(t, "be_a", "be_b")
	stats := "    source: {haproxy: {counter: bytes_in, rate_window: 300ms}}\n"
	first := "listen: \"\"\ninterval: 100ms\nhaproxy: {socket: " + h.Socket + "}\nbackends:\n  - name: be_a\n" + stats
	next := first + "  - name: be_b\n" + stats
	reload := make(chan string, 1)
	parse := func(yml string) *config.Config {
		cfg, err := config.Parse("test.yml", []byte(yml), nil)
		require.NoError(t, err)
		return cfg
	}
	reg := prometheus.NewRegistry()
	n := &recordingNotifier{ready: make(chan struct{})}
	d := New(parse(first), Options{Notifier: n, Registry: reg, Reload: func() (*config.Config, error) { return parse(<-reload), nil }})
	r := startDaemon(t, d, n)
	testenv.WaitFor(t, "socket_up", func() bool { return socketUp(t, reg, h.Socket) == 1 })
	old := d.current().units[0].client

	reload <- next
	r.hup <- syscall.SIGHUP
	testenv.WaitFor(t, "the reload", func() bool { return len(d.current().units) == 2 })
	units := d.current().units
	assert.True(t, old == units[0].client, "be_a keeps the socket's client")
	assert.True(t, old == units[1].client, "be_b, new, takes it too")
}

// TestReloadToAnotherSocketWithTheFirstDown: when the first HAProxy cannot
// take its start-up weights back (it is gone), the second's are kept all
// the same, and come back at exit: the first's must not stand in for them.
func TestReloadToAnotherSocketWithTheFirstDown(t *testing.T) {
	h1 := startFleetHAProxy(t, "be")
	h2 := startFleetHAProxy(t, "be")
	parse := func(socket string) *config.Config { return movingConfig(t, socket, ", timeout: 1s") }
	weights := func(socket string) map[string]int { return testenv.Weights(t, socket, "be") }
	written := func() bool { w := weights(h2.Socket); return w["s1"] > 10 && w["s2"] > 20 }
	n := &recordingNotifier{ready: make(chan struct{})}
	d := New(parse(h1.Socket), Options{Notifier: n, Reload: func() (*config.Config, error) { return parse(h2.Socket), nil }})
	r := startDaemon(t, d, n)
	testenv.WaitFor(t, "start-up weights kept", func() bool { return d.startWeights.has("be") })
	h1.Kill()

	r.hup <- syscall.SIGHUP
	testenv.WaitFor(t, "weights written to the second HAProxy", written)
	require.NoError(t, r.stop())
	assert.Equal(t, map[string]int{"s1": 10, "s2": 20}, weights(h2.Socket), "the second HAProxy's start-up weights back at exit")
}

// movingConfig is the configuration of the reload tests that move backend be
// between sockets: restore_on_exit, the HAProxy stats source, socket
// settings after the path given in socketExtra.
func movingConfig(t *testing.T, socket, socketExtra string) *config.Config {
	t.Helper()
	yml := "listen: \"\"\ninterval: 100ms\nrestore_on_exit: true\nhaproxy: {socket: " + socket + socketExtra + "}\nbackends:\n" +
		"  - name: be\n    source: {haproxy: {counter: bytes_in, rate_window: 300ms}}\n"
	cfg, err := config.Parse("test.yml", []byte(yml), nil)
	require.NoError(t, err)
	return cfg
}
