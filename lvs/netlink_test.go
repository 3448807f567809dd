package lvs

import (
	"context"
	"errors"
	"os"
	"syscall"
	"testing"

	"github.com/cloudflare/ipvs"
	"github.com/mdlayher/netlink"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// TestDialErrorNamesMissingIPVS feeds the exact error cloudflare/ipvs returns
// on a kernel without ip_vs.
func TestDialErrorNamesMissingIPVS(t *testing.T) {
	err := dialError(&netlink.OpError{Op: "receive", Err: syscall.ENOENT})
	assert.EqualError(t, err, "ipvs: kernel has no IP Virtual Server support (ip_vs module not loaded?): netlink receive: no such file or directory")
	assert.ErrorIs(t, err, ErrNoKernelSupport)

	err = dialError(&netlink.OpError{Op: "dial", Err: syscall.EPROTONOSUPPORT})
	assert.EqualError(t, err, "ipvs: open netlink: netlink dial: protocol not supported")
	assert.NotErrorIs(t, err, ErrNoKernelSupport)
}

// TestNewOnThisHost opens the real netlink socket. Where the host kernel has
// no ip_vs (the case on the build machines) New must say so; where it has
// ip_vs, New must still fail, on the TEST-NET service that cannot exist.
func TestNewOnThisHost(t *testing.T) {
	s, err := New(Config{Service: "udp://192.0.2.1:9"}, nil, nil)
	require.Error(t, err)
	assert.Nil(t, s)
	if _, statErr := os.Stat("/proc/net/ip_vs"); errors.Is(statErr, os.ErrNotExist) {
		assert.ErrorIs(t, err, ErrNoKernelSupport)
		assert.ErrorContains(t, err, "ipvs: kernel has no IP Virtual Server support (ip_vs module not loaded?): ")
		return
	}
	assert.NotErrorIs(t, err, ErrNoKernelSupport)
	assert.ErrorContains(t, err, "udp://192.0.2.1:9")
}

func TestNewRejectsBadConfigBeforeNetlink(t *testing.T) {
	_, err := New(Config{Service: "udp://nowhere"}, nil, nil)
	assert.EqualError(t, err, `ipvs: service "udp://nowhere": want a literal ip:port with a non-zero port`)
}

// familyGone is what a netlink request answers once ip_vs is unloaded: the
// kernel no longer knows the generic netlink family id the socket looked up.
var familyGone = &netlink.OpError{Op: "receive", Err: syscall.ENOENT}

// TestReconnectAfterIPVSReload: ip_vs unloaded and loaded again (to change
// conn_tab_bits, say) has a new family id; the Service must open a new
// connection rather than fail every cycle until the daemon is restarted.
func TestReconnectAfterIPVSReload(t *testing.T) {
	old := newFake(dr("10.0.2.1:2003", 100))
	s := newTestService(t, old, exampleServers)
	old.serviceErr = familyGone
	fresh := newFake(dr("10.0.2.1:2003", 60))
	s.redial = func() (conn, error) { return fresh, nil }

	got, err := s.Servers(context.Background())
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, 60, got[0].Weight, "read through the new connection")
	assert.True(t, old.closed, "the old connection is closed")
	require.NoError(t, s.SetWeights(context.Background(), []weighter.Change{{Server: "node-1", Weight: 7}}))
	assert.Equal(t, uint32(7), fresh.dests[0].Weight)
}

// TestIPVSUnloaded: while ip_vs stays unloaded, each cycle says so (not "no
// such file or directory") and keeps nothing half open.
func TestIPVSUnloaded(t *testing.T) {
	f := newFake(dr("10.0.2.1:2003", 100))
	s := newTestService(t, f, exampleServers)
	f.serviceErr = familyGone
	s.redial = func() (conn, error) { return nil, dialError(familyGone) }

	_, err := s.Servers(context.Background())
	assert.ErrorIs(t, err, ErrNoKernelSupport)
	assert.EqualError(t, err, "ipvs: service udp://10.0.0.1:2003: reconnect after ip_vs was unloaded: "+
		"ipvs: kernel has no IP Virtual Server support (ip_vs module not loaded?): netlink receive: no such file or directory")
	err = s.SetWeights(context.Background(), []weighter.Change{{Server: "node-1", Weight: 7}})
	assert.ErrorIs(t, err, ErrNoKernelSupport)
	assert.Empty(t, f.updates)
	assert.False(t, f.closed)
	require.NoError(t, s.Close())
	assert.True(t, f.closed)
}

// dumpClient answers Destinations only, as the library would.
type dumpClient struct {
	ipvs.Client
	err error
}

func (c dumpClient) Destinations(ipvs.Service) ([]ipvs.DestinationExtended, error) { return nil, c.err }

// TestDestinationsEmptyVersusGone: the library reports an empty dump as the
// bare os.ErrNotExist, which is a service with no real servers; a netlink
// ENOENT (ip_vs unloaded between the service lookup and the dump) is an
// error, not an empty service whose servers' metrics and state would vanish.
func TestDestinationsEmptyVersusGone(t *testing.T) {
	d, err := netlinkConn{Client: dumpClient{err: os.ErrNotExist}}.Destinations(udpService)
	assert.NoError(t, err)
	assert.Empty(t, d)
	_, err = netlinkConn{Client: dumpClient{err: familyGone}}.Destinations(udpService)
	assert.ErrorIs(t, err, syscall.ENOENT)
}
