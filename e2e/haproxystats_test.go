package e2e

import (
	"bufio"
	"maps"
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
	// leastconn, maxconn 1: the two connections go to different servers. Which
	// one takes the heavy one is HAProxy's choice; the test reads it from the plan.
	// (balance first, which would fix the order, ignores weights: once refuses it.)
	h := testenv.StartTwoServers(t, [2]string{testenv.StartDiscardServer(t), testenv.StartDiscardServer(t)}, "maxconn 1 weight 100")
	h.Client(t, 20_000, 50*time.Millisecond) // ~400 kB/s
	time.Sleep(200 * time.Millisecond)
	h.Client(t, 1_000, 50*time.Millisecond) // ~20 kB/s

	before := testenv.Weights(t, h.Socket, "be")
	r := runCmd(t, "once", "--socket", h.Socket, "--backend", "be", "--haproxy-counter", "bytes_in")
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
	if after := testenv.Weights(t, h.Socket, "be"); !maps.Equal(before, after) {
		t.Fatalf("dry run changed weights: %v -> %v", before, after)
	}
}
