package daemon

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/haproxy-weighter/haproxy-weighter/config"
	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
)

type recordingNotifier struct {
	mu     sync.Mutex
	states []string
	ready  chan struct{}
}

func (n *recordingNotifier) Notify(s string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.states = append(n.states, s)
	if s == "READY=1" {
		close(n.ready)
	}
}

func testConfig(t *testing.T, backend string) *config.Config {
	t.Helper()
	// Nothing listens on the socket: every cycle fails with haproxy_error,
	// which is all the reload logic needs.
	sock := filepath.Join(t.TempDir(), "none.sock")
	yml := "listen: \"\"\ninterval: 1h\nhaproxy: {socket: " + sock + "}\nbackends:\n  - name: " + backend +
		"\n    source: {haproxy: {counter: bytes_in}}\n"
	cfg, err := config.Parse("test.yml", []byte(yml), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// runningDaemon is a Daemon whose Run was started by startDaemon.
type runningDaemon struct {
	hup    chan os.Signal // a value reloads the configuration
	cancel context.CancelFunc
	done   chan struct{} // closed when Run has returned
	err    error         // what Run returned, once done is closed
}

// startDaemon starts d.Run and returns once d has said READY=1. Run is ended
// (and waited for) when the test ends, also on a failure part way.
func startDaemon(t *testing.T, d *Daemon, n *recordingNotifier) *runningDaemon {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &runningDaemon{hup: make(chan os.Signal, 1), cancel: cancel, done: make(chan struct{})}
	go func() { r.err = d.Run(ctx, r.hup); close(r.done) }()
	t.Cleanup(func() { cancel(); <-r.done })
	<-n.ready
	return r
}

// stop ends Run, as SIGTERM does, and returns its error.
func (r *runningDaemon) stop() error {
	r.cancel()
	<-r.done
	return r.err
}

func TestReloadKeepsOldConfigOnError(t *testing.T) {
	var mu sync.Mutex
	next := func() (*config.Config, error) { return nil, errors.New("bad.yml:3: unknown key \"x\"") }
	reload := func() (*config.Config, error) {
		mu.Lock()
		defer mu.Unlock()
		return next()
	}
	reg := prometheus.NewRegistry()
	n := &recordingNotifier{ready: make(chan struct{})}
	d := New(testConfig(t, "be_old"), Options{Reload: reload, Notifier: n, Registry: reg})
	r := startDaemon(t, d, n)
	reloadOK := func() float64 { return testutil.ToFloat64(d.metrics.ReloadGauge()) }
	if reloadOK() != 1 {
		t.Fatal("config_reload_success not 1 at start")
	}

	first := d.current()
	r.hup <- os.Interrupt
	testenv.WaitFor(t, "rejected reload", func() bool { return reloadOK() == 0 })
	if d.current() != first || d.config().Backends[0].Name != "be_old" {
		t.Fatal("a rejected reload replaced the running configuration")
	}

	mu.Lock()
	newCfg := testConfig(t, "be_new")
	next = func() (*config.Config, error) { return newCfg, nil }
	mu.Unlock()
	r.hup <- os.Interrupt
	testenv.WaitFor(t, "accepted reload", func() bool { return reloadOK() == 1 })
	if g := d.current(); g == first || g.runners[0].unit.Backend.Name != "be_new" {
		t.Fatal("reload did not start the new backend")
	}
	testenv.WaitFor(t, "old backend's series dropped", func() bool {
		b := backendsIn(t, reg, "haproxy_weighter_cycles_total")
		return !b["be_old"] && b["be_new"]
	})

	if err := r.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if strings.Join(n.states, ",") != "READY=1,STOPPING=1" {
		t.Errorf("notifications %v", n.states)
	}
}

// backendsIn lists the backend label values of one metric family.
func backendsIn(t *testing.T, reg *prometheus.Registry, name string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, m := range testenv.Series(t, reg, name, nil) {
		if b, ok := testenv.Labels(m)["backend"]; ok {
			out[b] = true
		}
	}
	return out
}
