package haproxy

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
)

// TestServersReportOpenSessions holds connections open through a real HAProxy
// and checks that Servers reports them per server (scur), read in the same
// round trip as the weights.
func TestServersReportOpenSessions(t *testing.T) {
	front := testenv.FreePort(t)
	// balance first with maxconn 2: the first two connections go to s1, the next to s2.
	cfg := testenv.HAProxyDefaults + fmt.Sprintf(`
frontend fe
  bind 127.0.0.1:%d
  default_backend be_first
backend be_first
  balance first
  server s1 %s maxconn 2
  server s2 %s maxconn 2
  server s3 %s maxconn 2
`, front, testenv.StartDiscardServer(t), testenv.StartDiscardServer(t), testenv.StartDiscardServer(t))
	h := testenv.StartHAProxy(t, cfg)
	b := newClient(t, h.Socket).Backend("be_first")

	for range 3 {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", front), 5*time.Second)
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
	}
	want := map[string]int{"s1": 2, "s2": 1, "s3": 0}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := byName(t, b)
		for name, n := range want {
			assert.Equal(c, n, got[name].Sessions, name)
		}
	}, 10*time.Second, 50*time.Millisecond)
}
