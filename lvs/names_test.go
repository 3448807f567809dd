package lvs

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNameOf(t *testing.T) {
	n, err := parseServers(map[string]string{
		"node-1":   "10.0.2.1:2003",
		"node-2":   "10.0.2.2",
		"node-2-b": "10.0.2.2:2004", // an exact ip:port beats the bare ip
		"v6":       "[2001:db8::3]:2003",
		"mapped":   "::ffff:10.0.2.9",
	})
	require.NoError(t, err)
	tests := []struct{ addr, want string }{
		{"10.0.2.1:2003", "node-1"},
		{"10.0.2.1:2004", "10.0.2.1:2004"}, // mapped port differs: unmapped
		{"10.0.2.2:2003", "node-2"},
		{"10.0.2.2:2004", "node-2-b"},
		{"[2001:db8::3]:2003", "v6"},
		{"10.0.2.9:53", "mapped"},
		{"10.0.2.4:2003", "10.0.2.4:2003"},
		{"[2001:db8::4]:2003", "[2001:db8::4]:2003"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, n.nameOf(netip.MustParseAddrPort(tt.addr)), tt.addr)
	}
}
