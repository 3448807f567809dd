package e2e

import (
	"bufio"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
)

// TestHAProxyStatsOnce is the one-shot dry run on the embedded default source,
// HAProxy's own counters: `once` must wait for a full rate window and print a
// plan with real rates (the daemon instead holds its first cycles), the heavy
// server getting the lower weight, and write nothing.
func TestHAProxyStatsOnce(t *testing.T) {
	front := testenv.FreePort(t)
	// leastconn, maxconn 1: the two connections go to different servers. Which
	// one takes the heavy one is HAProxy's choice; the test reads it from the plan.
	// (balance first, which would fix the order, ignores weights: once refuses it.)
	h := testenv.StartHAProxy(t, testenv.HAProxyDefaults+fmt.Sprintf(`
frontend fe
  bind 127.0.0.1:%d
  option contstats
  default_backend be_ingest
backend be_ingest
  balance leastconn
  server s1 %s maxconn 1 weight 100
  server s2 %s maxconn 1 weight 100
`, front, testenv.StartDiscardServer(t), testenv.StartDiscardServer(t)))

	send := func(bytesPerTick int) {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", front), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		testenv.WriteEvery(t, c, bytesPerTick, 50*time.Millisecond)
	}
	send(20_000) // ~400 kB/s
	time.Sleep(200 * time.Millisecond)
	send(1_000) // ~20 kB/s

	before := weights(t, h.Socket)
	r := runCmd(t, "once", "--socket", h.Socket, "--backend", "be_ingest", "--haproxy-counter", "bytes_in")
	if r.code != 0 {
		t.Fatalf("once exited %d:\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if strings.Contains(r.stdout, "holding") {
		t.Fatalf("once held instead of waiting for a full rate window:\n%s", r.stdout)
	}
	load, newW := map[string]float64{}, map[string]int{}
	sc := bufio.NewScanner(strings.NewReader(r.stdout))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		// SERVER ADDRESS LOAD CURRENT NEW ACTION REASON
		if len(f) >= 6 && (f[0] == "s1" || f[0] == "s2") {
			l, err := strconv.ParseFloat(f[2], 64)
			if err != nil {
				t.Fatalf("no load for %s in %q:\n%s", f[0], sc.Text(), r.stdout)
			}
			n, _ := strconv.Atoi(f[4])
			load[f[0]], newW[f[0]] = l, n
		}
	}
	heavy, light := "s1", "s2"
	if load["s2"] > load["s1"] {
		heavy, light = light, heavy
	}
	if load[light] <= 0 || load[heavy] < 5*load[light] {
		t.Fatalf("want one server's byte rate well above the other's (> 0), got %v:\n%s", load, r.stdout)
	}
	if newW[heavy] >= newW[light] {
		t.Fatalf("the heavy server %s must get the lower weight, got %v:\n%s", heavy, newW, r.stdout)
	}
	if after := weights(t, h.Socket); !sameWeights(before, after) {
		t.Fatalf("dry run changed weights: %v -> %v", before, after)
	}
}
