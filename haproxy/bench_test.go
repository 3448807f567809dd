package haproxy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/haproxytech/client-native/v5/runtime"
	"github.com/haproxytech/client-native/v5/runtime/options"

	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// BenchmarkSetWeights1000 writes the weights of 1,000 servers on a real HAProxy:
// "batched" is SetWeights (one connection, one request, read-back included),
// "client-native" is one client-native SetServerWeight per server. It also reports
// the CPU time HAProxy itself spent per write of 1,000 weights, which bounds how
// fast any client can be.
func BenchmarkSetWeights1000(b *testing.B) {
	h := testenv.StartHAProxy(b, bigConfig(1000))
	be := newClient(b, h.Socket).Backend("be_big")
	servers, err := be.Servers(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	plans := [2][]weighter.Change{}
	for i, s := range servers {
		plans[0] = append(plans[0], weighter.Change{Server: s.Name, Weight: 1 + i%256})
		plans[1] = append(plans[1], weighter.Change{Server: s.Name, Weight: 256 - i%256})
	}
	for _, bc := range []struct {
		name  string
		write func(context.Context, []weighter.Change) error
	}{{"batched", be.SetWeights}, {"client-native", func(ctx context.Context, ch []weighter.Change) error { return setWeightsEach(ctx, be, ch) }}} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			cpu0 := cpuTicks(b, h.PID())
			i := 0
			for b.Loop() {
				if err := bc.write(ctx, plans[i%2]); err != nil {
					b.Fatal(err)
				}
				i++
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/1000-servers")
			b.ReportMetric(float64(cpuTicks(b, h.PID())-cpu0)*10/float64(b.N), "haproxy-cpu-ms/op")
		})
	}
}

// cpuTicks is the user+system CPU time of a process in clock ticks (1/100 s on Linux).
func cpuTicks(b *testing.B, pid int) int {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatalf("haproxy cpu time: %v", err)
	}
	// Fields after the ")" that ends the command name: utime and stime are 12th and 13th.
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
	var utime, stime int
	if _, err := fmt.Sscan(f[11]+" "+f[12], &utime, &stime); err != nil {
		b.Fatalf("haproxy cpu time: %v", err)
	}
	return utime + stime
}

// setWeightsEach writes changes one server at a time through client-native's
// SetServerWeight: one connection per server and no read-back. It is the
// per-server baseline of BenchmarkSetWeights1000. Unix sockets only
// (client-native dials nothing else); it checks ctx between servers.
func setWeightsEach(ctx context.Context, b *RuntimeBackend, changes []weighter.Change) error {
	if err := b.validate(changes); err != nil {
		return err
	}
	if b.c.cfg.network() != "unix" {
		return fmt.Errorf("backend %s: client-native needs a unix socket, have %q", b.name, b.c.cfg.Socket)
	}
	rt, err := runtime.New(ctx, options.Socket(b.c.cfg.Socket), options.DoNotCheckRuntimeOnInit)
	if err != nil {
		return fmt.Errorf("backend %s: client-native: %w", b.name, err)
	}
	var errs []error
	for _, ch := range changes {
		if err := ctx.Err(); err != nil {
			return errors.Join(append(errs, err)...)
		}
		if err := rt.SetServerWeight(b.name, ch.Server, strconv.Itoa(ch.Weight)); err != nil {
			errs = append(errs, &weighter.ServerError{Server: ch.Server,
				Err: fmt.Errorf("backend %s: set weight %d: %w", b.name, ch.Weight, classify(err))})
		}
	}
	return errors.Join(errs...)
}

// TestWeightRuleMatchesClientNative: the batch check's weight rule
// (weighter.ValidWeight) accepts exactly the integer weights client-native's
// SetServerWeight accepts, which mirror HAProxy's own.
func TestWeightRuleMatchesClientNative(t *testing.T) {
	for w := -300; w <= 600; w++ {
		if got, want := weighter.ValidWeight(w), runtime.ServerWeightValid(strconv.Itoa(w)); got != want {
			t.Errorf("weight %d: ValidWeight %v, client-native %v", w, got, want)
		}
	}
}
