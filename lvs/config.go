package lvs

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/cloudflare/ipvs"

	"github.com/haproxy-weighter/haproxy-weighter/internal/field"
)

// Config selects one IPVS virtual service and names its real servers.
type Config struct {
	// Service is the virtual service: "udp://10.0.0.1:2003", "tcp://[2001:db8::1]:80"
	// or "fwmark:N" (an IPv4 firewall-mark service).
	Service string `yaml:"service"`
	// Servers maps a server name, as the load metrics know it, to the real
	// server's "ip:port" (or bare "ip", matching any port of that address).
	// Destinations not listed are named "ip:port".
	Servers map[string]string `yaml:"servers"`
}

// Validate reports the first configuration error.
func (c Config) Validate() error {
	if _, err := parseService(c.Service); err != nil {
		return field.Wrap(err, "service")
	}
	_, err := parseServers(c.Servers)
	return field.Wrap(err, "servers")
}

// parseService turns the service URL into the identifying fields of an
// ipvs.Service (the kernel looks a service up by these alone).
func parseService(s string) (ipvs.Service, error) {
	if s == "" {
		return ipvs.Service{}, errors.New("ipvs: service is empty (want udp://ip:port, tcp://ip:port or fwmark:N)")
	}
	if mark, ok := strings.CutPrefix(s, "fwmark:"); ok {
		n, err := strconv.ParseUint(mark, 10, 32)
		if err != nil || n == 0 {
			return ipvs.Service{}, fmt.Errorf("ipvs: service %q: fwmark must be an integer in 1..4294967295", s)
		}
		return ipvs.Service{FWMark: uint32(n), Family: ipvs.INET}, nil
	}
	scheme, hostport, ok := strings.Cut(s, "://")
	if !ok {
		return ipvs.Service{}, fmt.Errorf("ipvs: service %q: want udp://ip:port, tcp://ip:port or fwmark:N", s)
	}
	var proto ipvs.Protocol
	switch scheme {
	case "udp":
		proto = ipvs.UDP
	case "tcp":
		proto = ipvs.TCP
	case "sctp":
		proto = ipvs.SCTP
	default:
		return ipvs.Service{}, fmt.Errorf("ipvs: service %q: unknown protocol %q (want udp, tcp or sctp)", s, scheme)
	}
	ap, err := netip.ParseAddrPort(hostport)
	if err != nil || ap.Port() == 0 {
		return ipvs.Service{}, fmt.Errorf("ipvs: service %q: want a literal ip:port with a non-zero port", s)
	}
	if z := ap.Addr().Zone(); z != "" {
		return ipvs.Service{}, fmt.Errorf("ipvs: service %q: address has a zone (%%%s); IPVS addresses have none", s, z)
	}
	addr := ap.Addr().Unmap()
	return ipvs.Service{Address: addr, Port: ap.Port(), Protocol: proto, Family: family(addr)}, nil
}

func family(a netip.Addr) ipvs.AddressFamily {
	if a.Is4() {
		return ipvs.INET
	}
	return ipvs.INET6
}
