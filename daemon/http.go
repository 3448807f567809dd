package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/haproxy-weighter/haproxy-weighter/peers"
	"github.com/haproxy-weighter/haproxy-weighter/statuspage"
)

// handler serves the status page (/), /metrics, /healthz (every backend's
// loop still turns: what the systemd watchdog checks, for liveness probes
// where there is none) and /readyz (every backend had a successful cycle
// within 3 intervals).
func (d *Daemon) handler(reg *prometheus.Registry) http.Handler {
	mux := http.NewServeMux()
	metrics := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		// Cycles also update ready, but a wedged loop ends none: recompute it
		// now so the gauge never says ready while /readyz answers 503.
		d.updateReady()
		metrics.ServeHTTP(w, r)
	})
	mux.Handle(peers.Path, d.peers)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if r := d.stuck(); r != nil {
			http.Error(w, fmt.Sprintf("backend %s: loop stuck, no cycle ended for more than 2 intervals + timeout",
				r.unit.Backend.Name), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if ok, why := d.Ready(); !ok {
			http.Error(w, "not ready: "+why, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	mux.HandleFunc("GET /{$}", statuspage.Handler(d.statusPage, d.log)) // status.go, statuspage/
	return mux
}

// serve listens on addr (before returning, so a bad address is a start-up
// error) and serves until stop is called. A listener that stops later (an
// accept error, a web configuration file that broke between the start check
// and exporter-toolkit's own read) is opened again with backoff, up to
// webRetryMax apart: weighting goes on meanwhile, and the outage is logged
// at ERROR once with its cause, shown in systemd's status, and its end at INFO.
func (d *Daemon) serve(ctx context.Context, addr string, h http.Handler) (stop func(), err error) {
	if err := CheckWebConfig(d.config().WebConfigFile); err != nil {
		return nil, err
	}
	ln, err := d.listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	var (
		mu      sync.Mutex
		current *http.Server
		stopped bool
	)
	quit, done := make(chan struct{}), make(chan struct{})
	d.log.Info("serving metrics", "addr", ln.Addr().String())
	go func(ln net.Listener) {
		defer close(done)
		wait := d.webRetry
		var down time.Time // when the listener stopped; zero while it serves
		for {
			// Every phase is bounded: a client that connects and stalls (or a
			// keep-alive connection left idle) must not hold a goroutine and an
			// fd for ever on a port that runs on every load balancer.
			srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
				WriteTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute}
			mu.Lock()
			if stopped {
				mu.Unlock()
				ln.Close()
				return
			}
			current = srv
			mu.Unlock()
			if !down.IsZero() {
				d.log.Info("serving metrics again", "addr", ln.Addr().String(), "down_for", time.Since(down).Round(time.Second))
				d.notifier.Notify("STATUS=")
				down = time.Time{}
			}
			began := time.Now()
			err := d.serveWeb(srv, ln)
			ln.Close() // exporter-toolkit leaves it open when it fails before serving
			if errors.Is(err, http.ErrServerClosed) {
				return
			}
			if time.Since(began) > webRetryMax { // it served a while: a new outage, not the same one
				wait = d.webRetry
			}
			down = time.Now()
			d.log.Error("http server stopped", "addr", addr, "err", err,
				"effect", "/metrics, /healthz and /readyz unreachable, weighting goes on", "next", "listening again with backoff")
			// One line: a newline would start another sd_notify assignment.
			d.notifier.Notify("STATUS=HTTP endpoints down (" + addr + "): " + strings.ReplaceAll(err.Error(), "\n", "; "))
			for ln = nil; ln == nil; {
				timer := time.NewTimer(wait)
				select {
				case <-quit:
					timer.Stop()
					return
				case <-timer.C:
				}
				wait = min(2*wait, webRetryMax)
				ln, err = d.reopen(addr)
				if err != nil {
					d.log.Debug("http server listening again failed", "addr", addr, "err", err)
				}
			}
		}
	}(ln)
	return func() {
		close(quit)
		mu.Lock()
		stopped = true
		srv := current
		mu.Unlock()
		if srv == nil { // the goroutine has not served yet: it sees stopped and closes ln
			<-done
			return
		}
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			d.log.Warn("http connections still open at shutdown", "err", err, "next", "closing them")
			srv.Close()
		}
		<-done
	}, nil
}

// webRetryMax is the longest wait between two tries to listen again.
const webRetryMax = time.Minute

// reopen listens on addr again once the web configuration file checks: a
// listener that would fail at once on a broken file is not opened.
func (d *Daemon) reopen(addr string) (net.Listener, error) {
	ln, err := d.listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	if err := CheckWebConfig(d.config().WebConfigFile); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}
