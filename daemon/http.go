package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
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
	mux.Handle(PeerPath, d.peers)
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
	mux.HandleFunc("GET /{$}", d.status) // status.go
	return mux
}

// serve listens on addr (before returning, so a bad address is a start-up
// error) and serves until ctx ends.
func (d *Daemon) serve(ctx context.Context, addr string, h http.Handler) (stop func(), err error) {
	if err := CheckWebConfig(d.config().WebConfigFile); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	// Every phase is bounded: a client that connects and stalls (or a
	// keep-alive connection left idle) must not hold a goroutine and an fd for
	// ever on a port that runs on every load balancer.
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := d.serveWeb(srv, ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			d.log.Error("http server stopped", "err", err)
		}
	}()
	d.log.Info("serving metrics", "addr", ln.Addr().String())
	return func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			d.log.Warn("http server: connections still open at shutdown, closing them", "err", err)
			srv.Close()
		}
		<-done
	}, nil
}
