package sim

import (
	"context"
	"fmt"
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/haproxy"
	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// TestStickMatchAsHAProxy: the model's stick match places connections as a
// real HAProxy (the Debian package) does with `stick match src` over
// leastconn. The same steps on both: s3's pin for 127.0.0.5 is written,
// s3 is set to weight 0, then connections come from the pinned address and
// from one without an entry; each lands where the model says.
func TestStickMatchAsHAProxy(t *testing.T) {
	port := testenv.FreePort(t)
	cfg := testenv.HAProxyDefaults + fmt.Sprintf(`
frontend fe
  bind 127.0.0.1:%d
  default_backend be
backend be
  balance leastconn
  stick-table type ip size 100k expire 2h
  stick match src
  server s1 %s weight 100
  server s2 %s weight 100
  server s3 %s weight 100
`, port, testenv.StartDiscardServer(t), testenv.StartDiscardServer(t), testenv.StartDiscardServer(t))
	h := testenv.StartHAProxy(t, cfg)
	client, err := haproxy.New(haproxy.Config{Socket: h.Socket})
	require.NoError(t, err)
	real := client.Backend("be")
	ctx := context.Background()
	sessions := func() map[string]int {
		servers, err := real.Servers(ctx)
		require.NoError(t, err)
		return haproxy.ServerSessions(servers)
	}

	model := newBackend(3, initialWeight, pickLeastconn)
	model.pins = map[int]int{}
	target := &simTarget{b: model}
	set := weighter.PinChanges{Set: []weighter.Pin{{Client: "10.0.0.5", Server: "s3"}}}
	drain := []weighter.Change{{Server: "s3", Weight: 0}}
	require.NoError(t, target.SetWeightsAndPins(ctx, drain, set))
	// The same on HAProxy: the pin by the server's id (its position), then the weight.
	testenv.Command(t, h.Socket, "set table be key 127.0.0.5 data.server_id 3")
	require.NoError(t, real.SetWeights(ctx, drain))

	var conns []net.Conn
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	// Each step: a connection from 127.0.0.<last>, the model's client <last>.
	for k, last := range []int{5, 7, 5, 7, 7, 5, 7} {
		before := sessions()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(last))}}
		c, err := d.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		require.NoError(t, err)
		conns = append(conns, c)
		var landed string
		testenv.WaitFor(t, "the connection reaches a server", func() bool {
			for name, n := range sessions() {
				if n > before[name] {
					landed = name
					return true
				}
			}
			return false
		})
		model.open(last, 1, 1e9, 0)
		want := model.servers[model.conns[len(model.conns)-1].server].name
		assert.Equal(t, want, landed, "step %d, from 127.0.0.%d: HAProxy and the model agree", k, last)
	}
	assert.Equal(t, map[string]int{"s1": 2, "s2": 2, "s3": 3}, sessions(), "the pinned address's three on drained s3, the other's four on s1 and s2")
}
