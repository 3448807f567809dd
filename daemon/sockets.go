package daemon

import (
	"fmt"

	"github.com/haproxy-weighter/haproxy-weighter/haproxy"
	"github.com/haproxy-weighter/haproxy-weighter/internal/ownzero"
	"github.com/haproxy-weighter/haproxy-weighter/metrics"
)

// clientPool hands out one HAProxy client per runtime socket. A client reads
// `show stat` and `show sess all` once per cycle for every backend behind it,
// so backends on one socket share one read, and backends on another socket
// (another HAProxy process) have their own, and their own failures.
type clientPool map[haproxy.Config]*haproxy.Client

// get returns the client of cfg's socket, a new one recording its drains in
// zeroes when the pool has none.
func (p clientPool) get(cfg haproxy.Config, zeroes *ownzero.Record) (*haproxy.Client, error) {
	if c, ok := p[cfg]; ok {
		return c, nil
	}
	c, err := haproxy.New(cfg, haproxy.OwnZeroes(zeroes))
	if err != nil {
		return nil, err
	}
	p[cfg] = c
	return c, nil
}

// clients returns the clients of g's units by their socket settings: a
// reload that keeps a socket keeps its client, with its health (socket_up
// goes on, where a new client has none until its first exchange) and its
// one `show sess all` per cycle, which the fast readers a reload keeps go on
// sharing with the new ones.
func (g *group) clients() clientPool {
	pool := clientPool{}
	if g == nil {
		return pool
	}
	for _, u := range g.units {
		if u.client != nil {
			pool[u.socket] = u.client
		}
	}
	return pool
}

// socketStates lists the HAProxy sockets of the configuration in force, in
// the order of their first backend, for /metrics.
func (d *Daemon) socketStates() []metrics.SocketState {
	g := d.current()
	if g == nil {
		return nil
	}
	var out []metrics.SocketState
	index := map[*haproxy.Client]int{}
	for _, u := range g.units {
		if u.client == nil {
			continue
		}
		i, ok := index[u.client]
		if !ok {
			h := u.client.Health()
			i, index[u.client] = len(out), len(out)
			out = append(out, metrics.SocketState{Socket: u.client.Socket(), Known: h.Known, Up: h.Known && h.Err == nil})
		}
		out[i].Backends = append(out[i].Backends, u.Backend.Name)
	}
	return out
}

// socketNote says, for a backend that is not ready, how its HAProxy socket
// answered last: with several sockets, which HAProxy is in trouble.
func (u *managedBackend) socketNote() string {
	if u.client == nil {
		return ""
	}
	h := u.client.Health()
	switch {
	case !h.Known:
		return fmt.Sprintf(" (HAProxy socket %s: not answered yet)", u.client.Socket())
	case h.Err != nil:
		return fmt.Sprintf(" (HAProxy socket %s down: %v)", u.client.Socket(), h.Err)
	}
	return fmt.Sprintf(" (HAProxy socket %s up)", u.client.Socket())
}
