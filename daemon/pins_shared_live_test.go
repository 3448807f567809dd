package daemon

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
)

// startSharedPinScenes starts two HAProxies of version in front of the same
// four sinks, as two balancers: their pin tables are replicated by one
// peers section (each names itself with localpeer).
func startSharedPinScenes(t *testing.T, version string) (a, b *pinScene) {
	t.Helper()
	var sinks []*pinSink
	for _, name := range pinServers {
		sinks = append(sinks, startPinSink(t, name))
	}
	ports := []int{testenv.FreePort(t), testenv.FreePort(t)}
	scene := func(self string) *pinScene {
		sc := &pinScene{front: fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t)), conns: map[string]net.Conn{}, sinks: sinks}
		var cfg strings.Builder
		// Still the global section StartHAProxyVersion begins with.
		fmt.Fprintf(&cfg, "  localpeer %s\npeers mesh\n  peer lbA 127.0.0.1:%d\n  peer lbB 127.0.0.1:%d\n", self, ports[0], ports[1])
		cfg.WriteString(testenv.HAProxyDefaults)
		fmt.Fprintf(&cfg, "frontend fe\n  bind %s\n  option contstats\n  default_backend be\nbackend be\n  balance leastconn\n", sc.front)
		cfg.WriteString("  stick-table type ip size 100k expire 2h peers mesh\n  stick match src\n")
		for _, s := range sinks {
			fmt.Fprintf(&cfg, "  server %s %s weight 100\n", s.name, s.addr)
		}
		sc.h = testenv.StartHAProxyVersion(t, version, cfg.String())
		return sc
	}
	return scene("lbA"), scene("lbB")
}

// TestPinsLiveShared: two balancers whose HAProxies replicate the pin table
// through a peers section, the daemon on the first with pin.shared. On
// every HAProxy version:
//   - a pin written on the second balancer (its daemon's, here by hand)
//     reaches the first's table;
//   - the daemon pins its own heavy client, and that pin reaches the
//     second's table: one pin, on every balancer;
//   - the other balancer's pin, for a client the daemon never sees, stays
//     past pin.forget (not shared, the daemon forgets it);
//   - an operator's drain, on the first balancer, of that pin's server: the
//     daemon clears it from its own table (a pin beats a drain), and the
//     second's keeps it: HAProxy's peers do not replicate a clear, so each
//     balancer's daemon withdraws pins from its own table.
func TestPinsLiveShared(t *testing.T) {
	for _, version := range testenv.HAProxyVersions() {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			checkPinsShared(t, version)
		})
	}
}

func checkPinsShared(t *testing.T, version string) {
	a, b := startSharedPinScenes(t, version)
	const other = "127.0.0.99"
	b.command(t, "set table be key "+other+" data.server_id 2")
	testenv.WaitWithin(t, 20*time.Second, "the other balancer's pin replicated to the first", func() bool {
		return a.table(t)[other] == "s2"
	})

	pinTraffic(t, a)
	var logs testenv.SyncBuffer
	runPinDaemon(t, a.config(t, a.h.Socket, "    pin: {shared: true, forget: 1s}\n"), &logs)
	defer func() {
		if t.Failed() {
			t.Logf("daemon's log:\n%s", logs.String())
		}
	}()
	heavy := pinHeavies[0]
	var mine string
	testenv.WaitWithin(t, 30*time.Second, "the daemon's pin of its heavy client", func() bool {
		mine = a.table(t)[heavy]
		return mine != ""
	})
	testenv.WaitWithin(t, 20*time.Second, "the daemon's pin replicated to the other balancer", func() bool {
		return b.table(t)[heavy] == mine
	})

	// Past forget (1 s), a few cycles on: the other's pin is still there.
	time.Sleep(3 * time.Second)
	assert.Equal(t, "s2", a.table(t)[other], "the other balancer's pin forgotten by the daemon")
	recs := pinRecords(t, &logs)
	_, cleared := pinFound(recs, 0, "pin", other, "clear the pin")
	assert.False(t, cleared, "the daemon cleared the other balancer's pin")

	mark := len(pinRecords(t, &logs))
	a.command(t, "set server be/s2 state drain")
	testenv.WaitWithin(t, 20*time.Second, "the other's pin off the drained server of the first balancer", func() bool {
		_, ok := a.table(t)[other]
		return !ok
	})
	testenv.WaitFor(t, "the withdrawal in the log", func() bool {
		_, ok := pinFound(pinRecords(t, &logs), mark, "pin", other, "(another balancer's): it cannot take a pin")
		return ok
	})
	time.Sleep(time.Second)
	assert.Equal(t, "s2", b.table(t)[other], "the clear reached the other balancer: HAProxy's peers replicate clears now")
}
