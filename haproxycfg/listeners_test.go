package haproxycfg

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func addrPorts(s ...string) []netip.AddrPort {
	out := make([]netip.AddrPort, len(s))
	for i, a := range s {
		out[i] = netip.MustParseAddrPort(a)
	}
	return out
}

// TestListenersOfABackend reads the binds of the proxies that route to a
// backend from a configuration the real HAProxy accepts: every spelling of
// a TCP bind (`:P`, `0.0.0.0:P`, `[::]:P`, `ipv4@:P`, `:::P`, `ipv6@[::1]:P`,
// two addresses on one line, a port range, options after the address),
// default_backend and use_backend, a listen section serving itself and one
// forwarding. Skipped and said: unix@ and abns@ binds, accept-proxy. Shared
// and said, their binds left out: a frontend that also routes to another
// backend, one that names its backend at run time. Not there: a frontend
// routing elsewhere, a disabled one.
func TestListenersOfABackend(t *testing.T) {
	path := "testdata/listeners/routes.cfg"
	haproxyCheck(t, path)
	f, err := Read(path)
	require.NoError(t, err)

	got, err := f.Listeners("be_cache")
	require.NoError(t, err)
	assert.Equal(t, addrPorts("0.0.0.0:2003", "0.0.0.0:2004", "0.0.0.0:2006", "0.0.0.0:2091", "127.0.0.1:2007", "127.0.0.1:2020",
		"127.0.0.1:2021", "127.0.0.1:2022", "127.0.0.1:2040", "127.0.0.2:2008", "[::]:2005", "[::]:2009", "[::1]:2010"), got.Addrs)
	assert.Equal(t, []string{
		"frontend fe_plain (line 20): bind unix@/run/haproxy/fe.sock: not a TCP address (unix@)",
		"frontend fe_plain (line 21): bind abns@fe_plain: not a TCP address (abns@)",
		"frontend fe_plain (line 22): bind 127.0.0.1:2030 accept-proxy: the connections come through a proxy (PROXY protocol), whose address the socket table shows, not the client's",
	}, got.Skipped)
	assert.Equal(t, []string{
		"frontend fe_shared (line 30): also routes to be_other",
		"frontend fe_dynamic (line 35): may route to it by a use_backend rule whose backend is named at run time",
	}, got.Shared)

	self, err := f.Listeners("be_listen")
	require.NoError(t, err)
	assert.Equal(t, addrPorts("0.0.0.0:2090"), self.Addrs, "a listen section serves itself")

	other, err := f.Listeners("be_other")
	require.NoError(t, err)
	assert.Equal(t, addrPorts("0.0.0.0:2070"), other.Addrs)
	assert.Len(t, other.Shared, 2, "fe_shared and fe_dynamic")

	_, err = f.Listeners("be_missing")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `no backend or listen section "be_missing"`)
}

// TestBindAddresses: each bind spelling, and what is refused with why.
func TestBindAddresses(t *testing.T) {
	for in, want := range map[string]string{
		":80":                 "0.0.0.0:80",
		"*:80":                "0.0.0.0:80",
		"tcp6@:80":            "[::]:80",
		"tcp4@10.0.0.1:80":    "10.0.0.1:80",
		"[2001:db8::1]:443":   "[2001:db8::1]:443",
		"2001:db8::1:443":     "[2001:db8::1]:443",
		"[::ffff:10.0.0.1]:1": "10.0.0.1:1",
	} {
		got, err := parseBindAddr(in)
		require.NoError(t, err, in)
		assert.Equal(t, addrPorts(want), got, in)
	}
	for in, why := range map[string]string{
		"/run/x.sock":      "unix socket",
		"fd@3":             "fd@",
		"quic4@:443":       "quic4@",
		"localhost:80":     "host name",
		`"${ADDR}:80"`:     "environment variable",
		"10.0.0.1":         "no port",
		"10.0.0.1:0":       "port",
		":1-2000":          "more than 1024 ports",
		"ipv6@10.0.0.1:80": "IPv4 address with an IPv6 prefix",
		":80-70":           "port range",
	} {
		_, err := parseBindAddr(in)
		require.Error(t, err, in)
		assert.True(t, strings.Contains(err.Error(), why), "%s: %v", in, err)
	}
}
