package daemon

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// slowWriter is a target whose write is under way when the test says so:
// like HAProxy, it applies the commands it was sent even if the caller's
// context ends meanwhile, and then reports that context's end.
type slowWriter struct {
	*fakeTarget
	writing chan struct{} // receives when a write has started
	release chan struct{} // closed by the test to let it finish
}

func (w *slowWriter) SetWeights(ctx context.Context, ch []weighter.Change) error {
	w.writing <- struct{}{}
	<-w.release
	_ = w.fakeTarget.SetWeights(ctx, ch)
	return ctx.Err()
}

// TestReloadLetsTheWriteInFlightFinish: a SIGHUP arriving while a cycle writes
// must not cut the write off. HAProxy takes the weights anyway, but the cycle
// would record none of them in the Controller the reload keeps, so a drain
// (weight 0) it wrote would then look like an operator's and stay.
func TestReloadLetsTheWriteInFlightFinish(t *testing.T) {
	f := newFixture(t)
	w := &slowWriter{fakeTarget: f.tgt, writing: make(chan struct{}, 1), release: make(chan struct{})}
	f.r.unit.Backend.Target = w
	reg := prometheus.NewRegistry()
	d := New(testConfig(t, "be"), Options{Registry: reg})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d.start(ctx, []*managedBackend{f.r.unit}, nil)
	<-w.writing
	g := d.current()
	g.cancel() // what a reload's stop does first
	close(w.release)
	g.wg.Wait()
	if ok := (&fixture{reg: reg}).counter(t, weighter.ResultOK); ok != 1 {
		t.Errorf("the cycle that wrote during the reload was not recorded: cycles_total{result=\"ok\"} %v", ok)
	}
}
