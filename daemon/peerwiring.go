package daemon

import (
	"context"
	"net"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/config"
	"github.com/haproxy-weighter/haproxy-weighter/peers"
)

// startPeers points the peer set at cfg's peers (a reload may change them)
// and says when this daemon's own readings cannot reach them.
func (d *Daemon) startPeers(ctx context.Context, cfg *config.Config) {
	names := make([]string, len(cfg.Backends))
	for i, b := range cfg.Backends {
		names[i] = b.Name
	}
	d.peers.Forget(names)
	d.peers.UseClient(cfg.PeerClient.HTTP)
	switch changed := d.peers.Poll(ctx, cfg.Peers, time.Duration(cfg.Interval)); {
	case !changed:
		return // nothing new to say
	case len(cfg.Peers) == 0:
		d.log.Info("no peers any more", "effect", "each backend's fast signal is this balancer's own")
		return
	}
	if host, _, err := net.SplitHostPort(d.config().Listen); err == nil {
		if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
			d.log.Warn("peers set but listen is loopback",
				"listen", d.config().Listen, "effect", "the peers on other hosts cannot read this daemon's readings")
		}
	}
	t := peers.TimingFor(time.Duration(cfg.Interval))
	d.log.Info("adding the peers' fast readings", "peers", cfg.Peers, "poll", t.Poll, "timeout", t.Timeout)
}
