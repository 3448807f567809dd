package haproxy

import (
	"context"
	"testing"

	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// BenchmarkSetWeights1000 writes the weights of 1,000 servers on a real HAProxy:
// "batched" is SetWeights (one connection, one request, read-back included),
// "client-native" is one client-native SetServerWeight per server.
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
	}{{"batched", be.SetWeights}, {"client-native", be.SetWeightsEach}} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			i := 0
			for b.Loop() {
				if err := bc.write(ctx, plans[i%2]); err != nil {
					b.Fatal(err)
				}
				i++
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/1000-servers")
		})
	}
}
