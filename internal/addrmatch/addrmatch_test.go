package addrmatch

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

func series(v float64) weighter.Series {
	return weighter.Series{{Time: time.Unix(1_800_000_000, 0), Value: v}}
}

func TestServers(t *testing.T) {
	servers := []weighter.ServerState{
		{Name: "srv1", Address: "10.0.0.1:8080"},
		{Name: "srv2", Address: "10.0.0.2:8080"},
		{Name: "srv3", Address: "10.0.0.3:8080"},
		{Name: "srv4", Address: "10.0.0.3:8081"},              // srv3's host, another port
		{Name: "srv5", Address: "0.0.0.0:0"},                  // a template slot not filled yet
		{Name: "srv6", Address: "[2001:db8::6]:80"},           // IPv6
		{Name: "srv7", Address: "10.0.0.7:80", Host: "Web-7"}, // resolved from a name
		{Name: "srv8", Address: "10.0.0.8:80"},
		{Name: "srv9", Address: "10.0.0.8:80"}, // shares srv8's address and port
	}
	loads := weighter.Loads{
		"10.0.0.1:8080":     series(1), // exact
		"10.0.0.2:9100":     series(2), // the exporter's port: the one server at that IP
		"10.0.0.3:8081":     series(4), // exact, though srv3 shares the IP
		"10.0.0.3:9100":     series(3), // srv3 or srv4? ambiguous
		"2001:db8::6":       series(6), // bare IPv6
		"web-7.:9100":       series(7), // the host name, case and trailing dot aside
		"10.0.0.8:80":       series(8), // srv8 and srv9 share it
		"10.0.0.99:80":      series(9), // no such server
		"0.0.0.0:0":         series(5), // never matches an unset address
		"::ffff:10.0.0.1":   series(1), // IPv4-mapped: srv1 again, a duplicate
		"no-such-host.test": series(0),
	}
	m := Servers(loads, servers)
	assert.Equal(t, map[string]string{"10.0.0.2:9100": "srv2", "10.0.0.3:8081": "srv4", "2001:db8::6": "srv6",
		"web-7.:9100": "srv7"}, m.Matched)
	assert.Equal(t, []string{"0.0.0.0:0", "10.0.0.99:80", "no-such-host.test"}, m.Unknown)
	assert.Equal(t, map[string][]string{"10.0.0.3:9100": {"srv3", "srv4"}, "10.0.0.8:80": {"srv8", "srv9"}}, m.Ambiguous)
	assert.Equal(t, map[string][]string{"srv1": {"10.0.0.1:8080", "::ffff:10.0.0.1"}}, m.Duplicate)
	assert.Equal(t, weighter.Loads{"srv2": series(2), "srv4": series(4), "srv6": series(6), "srv7": series(7)}, m.Loads)
}

// The README's rules as properties over random backends and series names:
// every series ends up in exactly one outcome; a matched series carries its
// own points to a server whose host it names, at the series' port when a
// server there has it, and never to one of two servers it cannot tell apart;
// and with one server per address every series named after a server's
// address (exactly, by IP alone, or with an exporter's port) is matched to it.
func TestServersProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	ips := []string{"10.0.0.1", "10.0.0.2", "10.0.0.3", "2001:db8::1", "0.0.0.0"}
	ports := []string{"80", "8080", "9100"}
	for iter := range 2000 {
		n := 1 + r.IntN(8)
		servers := make([]weighter.ServerState, n)
		for i := range servers {
			ip, port := ips[r.IntN(len(ips))], ports[r.IntN(len(ports))]
			servers[i] = weighter.ServerState{Name: fmt.Sprintf("srv%d", i+1), Address: joinHostPort(ip, port)}
		}
		loads := weighter.Loads{}
		for range r.IntN(10) {
			ip := ips[r.IntN(len(ips))]
			name := ip
			if r.IntN(2) == 0 {
				name = joinHostPort(ip, ports[r.IntN(len(ports))])
			}
			loads[name] = series(float64(r.IntN(100)))
		}
		m := Servers(loads, servers)

		outcomes := map[string]int{}
		for name := range m.Matched {
			outcomes[name]++
		}
		for _, name := range m.Unknown {
			outcomes[name]++
		}
		for name := range m.Ambiguous {
			outcomes[name]++
		}
		for _, names := range m.Duplicate {
			for _, name := range names {
				outcomes[name]++
			}
		}
		for name := range loads {
			if outcomes[name] != 1 {
				t.Fatalf("iter %d: series %q has %d outcomes (%+v)", iter, name, outcomes[name], m)
			}
		}
		for name, server := range m.Matched {
			assert.Equal(t, loads[name], m.Loads[server], "iter %d: %s's points", iter, server)
			host, port := splitAddress(name)
			s := servers[slices.IndexFunc(servers, func(s weighter.ServerState) bool { return s.Name == server })]
			sHost, sPort := splitAddress(s.Address)
			if normalHost(host) != normalHost(sHost) || normalHost(host) == "0.0.0.0" {
				t.Fatalf("iter %d: series %q matched %s at %s", iter, name, server, s.Address)
			}
			sameHost := 0
			atPort := 0
			for _, o := range servers {
				h, p := splitAddress(o.Address)
				if normalHost(h) == normalHost(host) {
					sameHost++
					if p == port {
						atPort++
					}
				}
			}
			if atPort > 0 && (sPort != port || atPort > 1) || atPort == 0 && sameHost > 1 {
				t.Fatalf("iter %d: series %q matched %s at %s among %v", iter, name, server, s.Address, servers)
			}
		}
		assert.Len(t, m.Loads, len(m.Matched), "iter %d", iter)

		// One server per address: every series named after one is matched to it.
		unique := map[string]bool{}
		var distinct []weighter.ServerState
		for _, s := range servers {
			h, _ := splitAddress(s.Address)
			if !unique[h] && h != "0.0.0.0" {
				unique[h] = true
				distinct = append(distinct, s)
			}
		}
		named := weighter.Loads{}
		for i, s := range distinct {
			h, p := splitAddress(s.Address)
			switch i % 3 {
			case 0:
				named[s.Address] = series(1)
			case 1:
				named[h] = series(1)
			default:
				named[joinHostPort(h, p+"1")] = series(1) // an exporter's port
			}
		}
		m = Servers(named, distinct)
		assert.Len(t, m.Matched, len(distinct), "iter %d: %+v from %v", iter, m, distinct)
	}
}

func joinHostPort(host, port string) string {
	if slices.Contains([]byte(host), ':') {
		return "[" + host + "]:" + port
	}
	return host + ":" + port
}

// A server's address is compared in the same canonical form as a series':
// an IPv4-mapped or upper-case IPv6 address HAProxy reports matches the
// series that names it, in either spelling.
func TestServerAddressesNormalised(t *testing.T) {
	servers := []weighter.ServerState{
		{Name: "mapped", Address: "[::ffff:10.0.0.1]:80"},
		{Name: "upper", Address: "[2001:DB8::A]:80"},
	}
	loads := weighter.Loads{"[::ffff:10.0.0.1]:80": series(1), "2001:db8::a": series(2)}
	m := Servers(loads, servers)
	assert.Equal(t, map[string]string{"[::ffff:10.0.0.1]:80": "mapped", "2001:db8::a": "upper"}, m.Matched)
	assert.Empty(t, m.Unknown)
}
