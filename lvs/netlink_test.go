package lvs

import (
	"errors"
	"os"
	"syscall"
	"testing"

	"github.com/mdlayher/netlink"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
	s, err := New(Config{Service: "udp://192.0.2.1:9"}, nil)
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
	_, err := New(Config{Service: "udp://nowhere"}, nil)
	assert.EqualError(t, err, `ipvs: service "udp://nowhere": want a literal ip:port with a non-zero port`)
}
