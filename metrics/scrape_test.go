package metrics

import (
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// TestScrapeDuringObserveSeesEveryServer: a scrape that runs while a cycle
// is recorded must see each server's weight, the old one or the new one,
// never a backend with servers missing (a gap in every graph, and an
// absent() alert firing).
func TestScrapeDuringObserveSeesEveryServer(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	cycle := func(w int) weighter.Cycle {
		return weighter.Cycle{Backend: "be", Result: weighter.ResultOK, Plan: weighter.Plan{Time: time.Unix(1_800_000_000, 0),
			Imbalance: 1.2, Servers: []weighter.ServerPlan{
				{Server: "s1", Load: 1, Current: w}, {Server: "s2", Load: 2, Current: w}, {Server: "s3", Load: 3, Current: w}}}}
	}
	m.Observe(cycle(100))

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	var worst int
	go func() {
		defer wg.Done()
		worst = 3
		for {
			select {
			case <-stop:
				return
			default:
			}
			n, err := testutil.GatherAndCount(reg, "haproxy_weighter_server_weight", "haproxy_weighter_server_load")
			if err != nil {
				t.Error(err)
				return
			}
			worst = min(worst, n/2)
		}
	}()
	for i := range 2000 {
		m.Observe(cycle(100 + i%2))
	}
	close(stop)
	wg.Wait()
	if worst != 3 {
		t.Errorf("a scrape saw %d of the 3 servers of the backend", worst)
	}
}
