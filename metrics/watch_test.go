package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// The sockets and addresses are read at each scrape: a socket, backend or
// server that a reload removed, or an address that changed, leaves no series.
func TestWatchedStateLeavesNoStaleSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	sockets := []SocketState{
		{Socket: "/run/one.sock", Backends: []string{"be_a"}, Known: true, Up: true},
		{Socket: "/run/two.sock", Backends: []string{"be_b"}, Known: true},
	}
	addresses := []AddressState{{Backend: "be_a", Servers: map[string]string{"srv1": "10.0.0.1:80", "srv2": "10.0.0.2:80"}}}
	m.WatchSockets(func() []SocketState { return sockets })
	m.WatchAddresses(func() []AddressState { return addresses })
	names := []string{"haproxy_weighter_haproxy_socket_up", "haproxy_weighter_backend_socket_info", "haproxy_weighter_server_info"}
	want := func(text string) {
		t.Helper()
		if err := testutil.GatherAndCompare(reg, strings.NewReader(text), names...); err != nil {
			t.Error(err)
		}
	}
	const help = `
# HELP haproxy_weighter_backend_socket_info The HAProxy runtime socket each backend is weighted through (value 1).
# TYPE haproxy_weighter_backend_socket_info gauge
# HELP haproxy_weighter_haproxy_socket_up 1 when the newest exchange with HAProxy through this runtime socket got a runtime API answer, 0 when it failed (dial, I/O, timeout, garbage); absent before the first.
# TYPE haproxy_weighter_haproxy_socket_up gauge
# HELP haproxy_weighter_server_info The address (ip:port) of each server, as HAProxy reported it in the newest read (value 1).
# TYPE haproxy_weighter_server_info gauge
`
	want(help + `
haproxy_weighter_backend_socket_info{backend="be_a",socket="/run/one.sock"} 1
haproxy_weighter_backend_socket_info{backend="be_b",socket="/run/two.sock"} 1
haproxy_weighter_haproxy_socket_up{socket="/run/one.sock"} 1
haproxy_weighter_haproxy_socket_up{socket="/run/two.sock"} 0
haproxy_weighter_server_info{address="10.0.0.1:80",backend="be_a",server="srv1"} 1
haproxy_weighter_server_info{address="10.0.0.2:80",backend="be_a",server="srv2"} 1
`)

	// A reload moves be_b onto the first socket and drops the second; srv2
	// is gone and srv1 has a new address.
	sockets = []SocketState{{Socket: "/run/one.sock", Backends: []string{"be_a", "be_b"}, Known: true, Up: true}}
	addresses = []AddressState{{Backend: "be_a", Servers: map[string]string{"srv1": "10.0.0.9:80"}}}
	want(help + `
haproxy_weighter_backend_socket_info{backend="be_a",socket="/run/one.sock"} 1
haproxy_weighter_backend_socket_info{backend="be_b",socket="/run/one.sock"} 1
haproxy_weighter_haproxy_socket_up{socket="/run/one.sock"} 1
haproxy_weighter_server_info{address="10.0.0.9:80",backend="be_a",server="srv1"} 1
`)
}
