package haproxy

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/duration"
	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// peersConfig is be_pin with its table shared through a `peers` section that
// names the local host alone (lp1): what carries stick-table entries over a
// reload. Its first line goes on the global section testenv wrote.
func peersConfig(t testing.TB) string {
	return fmt.Sprintf(`  localpeer lp1
peers local
  peer lp1 127.0.0.1:%d
`, testenv.FreePort(t)) + testenv.HAProxyDefaults + fmt.Sprintf(`
backend be_pin
  stick-table type ip size 100 expire 2h peers local
  stick match src
  server s1 %s
  server s2 %s
`, testenv.StartDiscardServer(t), testenv.StartDiscardServer(t))
}

// What a reload does to the pins, with a local-only `peers` section: 3.4
// hands them to the new process (a reload with -sf, and the master's on
// SIGUSR2); Debian 12's 2.6.12 does not (-sf here; SIGUSR2 and an old process
// held alive by a connection lost them too, by hand): its local peer never
// connects (`show peers`: last_status=NONE). On 2.6 the daemon must write its
// pins again after a reload: Pins then reads an empty table.
func TestPinsAcrossReload(t *testing.T) {
	pin := weighter.PinChanges{Set: []weighter.Pin{{Client: "127.0.0.5", Server: "s2"}}}
	want := []weighter.Pin{{Client: "127.0.0.5", Server: "s2"}}
	t.Run("3.4 -sf keeps them", func(t *testing.T) {
		h := testenv.StartHAProxyVersion(t, "3.4", peersConfig(t))
		b := newClient(t, h.Socket).Backend("be_pin")
		require.NoError(t, b.SetWeightsAndPins(testCtx(t), nil, pin))
		h.ReloadSoft()
		testenv.WaitFor(t, "the pin in the new process", func() bool {
			table, err := b.Pins(testCtx(t))
			return err == nil && assert.ObjectsAreEqual(want, table.Pins)
		})
	})
	t.Run("3.4 master reload keeps them", func(t *testing.T) {
		h := testenv.StartHAProxyMasterVersion(t, "3.4", "global\n"+peersConfig(t))
		c, err := New(Config{Socket: h.Socket, Master: true, Timeout: duration.Duration(5 * time.Second)})
		require.NoError(t, err)
		b := c.Backend("be_pin")
		require.NoError(t, b.SetWeightsAndPins(testCtx(t), nil, pin))
		h.Reload()
		testenv.WaitFor(t, "the pin in the new worker", func() bool {
			table, err := b.Pins(testCtx(t))
			return err == nil && assert.ObjectsAreEqual(want, table.Pins)
		})
	})
	t.Run("2.6 -sf loses them", func(t *testing.T) {
		h := testenv.StartHAProxyVersion(t, "2.6", peersConfig(t))
		b := newClient(t, h.Socket).Backend("be_pin")
		require.NoError(t, b.SetWeightsAndPins(testCtx(t), nil, pin))
		old := h.ReloadSoft()
		// Once the old process is gone, nothing can teach the new one.
		testenv.WaitFor(t, "the old process gone", func() bool { return syscall.Kill(old, 0) != nil })
		table, err := b.Pins(testCtx(t))
		require.NoError(t, err)
		assert.Empty(t, table.Pins)
		assert.Equal(t, 0, table.Used)
	})
}
