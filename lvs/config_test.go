package lvs

import (
	"net/netip"
	"testing"

	"github.com/cloudflare/ipvs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseService(t *testing.T) {
	tests := []struct {
		in   string
		want ipvs.Service
	}{
		{"udp://10.0.0.1:2003", udpService},
		{"tcp://192.0.2.7:80", ipvs.Service{Address: netip.MustParseAddr("192.0.2.7"), Port: 80, Protocol: ipvs.TCP, Family: ipvs.INET}},
		{"sctp://[2001:db8::1]:3868", ipvs.Service{Address: netip.MustParseAddr("2001:db8::1"), Port: 3868, Protocol: ipvs.SCTP, Family: ipvs.INET6}},
		{"tcp://[::ffff:10.0.0.1]:80", ipvs.Service{Address: netip.MustParseAddr("10.0.0.1"), Port: 80, Protocol: ipvs.TCP, Family: ipvs.INET}},
		{"fwmark:42", ipvs.Service{FWMark: 42, Family: ipvs.INET}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseService(tt.in)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"empty service", Config{}, "ipvs: service is empty (want udp://ip:port, tcp://ip:port or fwmark:N)"},
		{"no scheme", Config{Service: "10.0.0.1:2003"}, `ipvs: service "10.0.0.1:2003": want udp://ip:port, tcp://ip:port or fwmark:N`},
		{"bad scheme", Config{Service: "http://10.0.0.1:80"}, `ipvs: service "http://10.0.0.1:80": unknown protocol "http" (want udp, tcp or sctp)`},
		{"hostname", Config{Service: "udp://graphite:2003"}, `ipvs: service "udp://graphite:2003": want a literal ip:port with a non-zero port`},
		{"no port", Config{Service: "udp://10.0.0.1"}, `ipvs: service "udp://10.0.0.1": want a literal ip:port with a non-zero port`},
		{"port 0", Config{Service: "udp://10.0.0.1:0"}, `ipvs: service "udp://10.0.0.1:0": want a literal ip:port with a non-zero port`},
		{"fwmark 0", Config{Service: "fwmark:0"}, `ipvs: service "fwmark:0": fwmark must be an integer in 1..4294967295`},
		{"fwmark text", Config{Service: "fwmark:web"}, `ipvs: service "fwmark:web": fwmark must be an integer in 1..4294967295`},
		{"fwmark too big", Config{Service: "fwmark:4294967296"}, `ipvs: service "fwmark:4294967296": fwmark must be an integer in 1..4294967295`},
		{"bad server address", Config{Service: "udp://10.0.0.1:2003", Servers: map[string]string{"node-1": "node-1.example:2003"}},
			`ipvs: servers: node-1: address "node-1.example:2003" is not a literal ip or ip:port`},
		{"server port 0", Config{Service: "udp://10.0.0.1:2003", Servers: map[string]string{"node-1": "10.0.2.1:0"}},
			`ipvs: servers: node-1: address "10.0.2.1:0" has port 0`},
		{"empty server name", Config{Service: "udp://10.0.0.1:2003", Servers: map[string]string{"": "10.0.2.1:2003"}},
			`ipvs: servers: empty server name for "10.0.2.1:2003"`},
		{"service with zone", Config{Service: "tcp://[fe80::1%eth0]:80"},
			`ipvs: service "tcp://[fe80::1%eth0]:80": address has a zone (%eth0); IPVS addresses have none`},
		{"server with zone", Config{Service: "udp://10.0.0.1:2003", Servers: map[string]string{"node-1": "[fe80::1%eth0]:2003"}},
			`ipvs: servers: node-1: address "[fe80::1%eth0]:2003" has a zone (%eth0); IPVS addresses have none`},
		{"bare server with zone", Config{Service: "udp://10.0.0.1:2003", Servers: map[string]string{"node-1": "fe80::1%eth0"}},
			`ipvs: servers: node-1: address "fe80::1%eth0" has a zone (%eth0); IPVS addresses have none`},
		{"two names one address", Config{Service: "udp://10.0.0.1:2003", Servers: map[string]string{"b": "10.0.2.1:2003", "a": "10.0.2.1:2003"}},
			`ipvs: servers: a and b both map to 10.0.2.1:2003`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.EqualError(t, tt.cfg.Validate(), tt.want)
		})
	}
}

func TestConfigValid(t *testing.T) {
	cfg := Config{Service: "udp://10.0.0.1:2003", Servers: map[string]string{
		"node-1": "10.0.2.1:2003", "node-2": "10.0.2.2", "node-3": "[2001:db8::3]:2003",
	}}
	assert.NoError(t, cfg.Validate())
}
