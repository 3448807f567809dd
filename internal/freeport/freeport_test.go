package freeport

import (
	"fmt"
	"net"
	"testing"

	"github.com/stretchr/testify/require"
)

// Get's ports are below the kernel's ephemeral range (no outgoing
// connection can take one before the caller binds it), and bindable on
// 127.0.0.1 and on the wildcard.
func TestGetIsBelowTheEphemeralRange(t *testing.T) {
	low := ephemeralLow()
	require.GreaterOrEqual(t, low, 1024)
	for range 20 {
		port, err := Get()
		require.NoError(t, err)
		require.Less(t, port, low)
		require.GreaterOrEqual(t, port, 1024)
		for _, addr := range []string{fmt.Sprintf("127.0.0.1:%d", port), fmt.Sprintf(":%d", port)} {
			l, err := net.Listen("tcp", addr)
			require.NoError(t, err, addr)
			require.NoError(t, l.Close())
		}
	}
}

// No port is given twice, though each is released (free again) at once:
// 500 draws from some 20,000 ports would repeat one with a chance of
// 1 − e^(−500²/40,000), above 99.9 %.
func TestGetNeverGivesAPortTwice(t *testing.T) {
	seen := map[int]bool{}
	for range 500 {
		port, err := Get()
		require.NoError(t, err)
		require.False(t, seen[port], "port %d given twice", port)
		seen[port] = true
	}
}

// A port handed out is reserved against other processes: its abstract
// socket cannot be bound while the reservation lasts.
func TestGetReservesThePortAgainstOtherProcesses(t *testing.T) {
	port, err := Get()
	require.NoError(t, err)
	_, err = net.Listen("unix", reservation(port))
	require.Error(t, err, "port %d is not reserved", port)
}
