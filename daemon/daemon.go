// Package daemon runs haproxy-weighter as a service: it wires the configuration
// to sources and targets, cycles every backend on its own schedule, serves
// /metrics, /healthz and /readyz, reloads on SIGHUP and talks to systemd. It
// also runs the single cycle of `once`, with the same start checks.
package daemon

import (
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/haproxy-weighter/haproxy-weighter/config"
	"github.com/haproxy-weighter/haproxy-weighter/internal/ownzero"
	"github.com/haproxy-weighter/haproxy-weighter/metrics"
	"github.com/haproxy-weighter/haproxy-weighter/peers"
)

// Options are the daemon's collaborators; zero values pick the real ones.
type Options struct {
	Log *slog.Logger
	// Reload re-reads the configuration on SIGHUP; nil makes SIGHUP a no-op.
	Reload   func() (*config.Config, error)
	Notifier Notifier
	Clock    Clock
	Registry *prometheus.Registry
}

// Daemon is the long-running weighter.
type Daemon struct {
	cfg      *config.Config
	reload   func() (*config.Config, error)
	log      *slog.Logger
	notifier Notifier
	clock    Clock
	reg      *prometheus.Registry
	metrics  *metrics.Metrics

	// grace is how long stop waits, beyond a cycle timeout, for a backend's
	// loop to end before it gives up on it.
	grace time.Duration

	// startWeights keeps, for restore_on_exit, the weights each backend had
	// before the daemon's first write (restore.go). It outlives reloads.
	startWeights *startWeights

	// peers publishes the backends' own fast readings and fetches the
	// other balancers' daemons' (package peers). It outlives reloads.
	peers *peers.Set

	// zeroes is the one record of the weight-0 drains this process wrote,
	// which every target it builds writes to and reads (restore_on_exit
	// undoes those and no other; IPVS writes over no other). It outlives
	// reloads.
	zeroes *ownzero.Record

	// haproxyChecked is the last check of each HAProxy configuration file,
	// by path (startcheck.go); only Run's goroutine uses it.
	haproxyChecked map[string]haproxyFileState

	// listen opens the HTTP listener (net.Listen; tests inject faults), and
	// webRetry is the first wait before the listener is opened again after it
	// stopped (http.go).
	listen   func(network, addr string) (net.Listener, error)
	webRetry time.Duration

	// shared finds server addresses two kernel-read backends share (sharedaddr.go).
	shared *sharedAddresses

	mu    sync.Mutex
	group *group // the runners of the configuration in force
}

// New returns a daemon for a validated configuration.
func New(cfg *config.Config, o Options) *Daemon {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Notifier == nil {
		o.Notifier = &SystemdNotifier{Log: o.Log}
	}
	if o.Clock == nil {
		o.Clock = realClock{}
	}
	if o.Registry == nil {
		o.Registry = prometheus.NewRegistry()
	}
	d := &Daemon{cfg: cfg, reload: o.Reload, log: o.Log, notifier: o.Notifier, clock: o.Clock,
		reg: o.Registry, metrics: metrics.New(o.Registry), grace: 5 * time.Second,
		startWeights: newStartWeights(o.Log), peers: peers.New(metrics.NewPeers(o.Registry), o.Log), zeroes: &ownzero.Record{},
		listen: net.Listen, webRetry: time.Second, shared: newSharedAddresses()}
	d.metrics.WatchSockets(d.socketStates)
	d.metrics.WatchAddresses(d.addressStates)
	return d
}

// config is the configuration in force (a reload replaces it).
func (d *Daemon) config() *config.Config {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cfg
}

// current is the group of runners in force, nil before the first start.
func (d *Daemon) current() *group {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.group
}
