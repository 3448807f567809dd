package testenv

import (
	"fmt"
	"net"
	"testing"

	"github.com/stretchr/testify/require"
)

// FreePort's ports are below the kernel's ephemeral range (no outgoing
// connection can take one before the test binds it), and bindable on
// 127.0.0.1 and on the wildcard.
func TestFreePortIsBelowTheEphemeralRange(t *testing.T) {
	low := ephemeralLow()
	require.GreaterOrEqual(t, low, 1024)
	for range 20 {
		port := FreePort(t)
		require.Less(t, port, low)
		require.GreaterOrEqual(t, port, 1024)
		for _, addr := range []string{fmt.Sprintf("127.0.0.1:%d", port), fmt.Sprintf(":%d", port)} {
			l, err := net.Listen("tcp", addr)
			require.NoError(t, err, addr)
			require.NoError(t, l.Close())
		}
	}
}
