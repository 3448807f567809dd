package main

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/haproxy"
	"github.com/haproxy-weighter/haproxy-weighter/sockdiag"
)

// reader is one way of reading the fast signal. read returns how many of the backend's
// connections the read saw (a check that it reads what it should).
type reader struct {
	name string
	read func(ctx context.Context) (seen int, err error) // nil for none
}

// newReader builds method's reader of backend be, its servers at servers (name → address),
// on the HAProxy whose runtime socket is socket and whose process is pid: the project's
// readers, used as the daemon uses them.
func newReader(method string, servers map[string]netip.AddrPort, socket string, pid int) (reader, error) {
	switch method {
	case "none":
		return reader{name: method}, nil
	case "kernel":
		// HAProxy's pid: its sockets are told from others' by inode when this process may
		// list HAProxy's descriptors (root), by uid otherwise, as in the daemon.
		r := sockdiag.New(sockdiag.Config{PIDs: func(context.Context) ([]int, error) { return []int{pid}, nil }})
		return reader{name: method, read: func(ctx context.Context) (int, error) {
			got, err := r.Read(ctx, servers)
			seen := 0
			for _, s := range got.Servers {
				seen += s.Open
			}
			return seen, err
		}}, nil
	}
	c, err := haproxy.New(haproxy.Config{Socket: socket, Timeout: 0})
	if err != nil {
		return reader{}, err
	}
	switch method {
	case "sess":
		// The daemon spaces its dumps by their size (haproxy.DefaultLocalBudget: every ~6 s
		// at 10,000 streams); here every read dumps, to measure what a dump every interval
		// costs.
		c.SetLocalBudget(haproxy.LocalBudget{Share: time.Nanosecond, PerStream: time.Nanosecond})
		be := c.Backend("be")
		names := make([]string, 0, len(servers))
		for name := range servers {
			names = append(names, name)
		}
		return reader{name: method, read: func(ctx context.Context) (int, error) {
			got, err := be.ReadLocal(ctx, haproxy.LocalQuery{Servers: names})
			seen := 0
			for _, n := range got.OpenAt {
				seen += n
			}
			return seen, err
		}}, nil
	case "stat":
		return reader{name: method, read: func(ctx context.Context) (int, error) {
			got, err := c.Stats(ctx, "be")
			seen := 0
			for _, s := range got {
				seen += int(s.CurrentSessions)
			}
			return seen, err
		}}, nil
	}
	return reader{}, fmt.Errorf("unknown method %q", method)
}
