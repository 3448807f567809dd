package daemon

import (
	"context"
	"testing"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// hangingTarget is an HAProxy that accepts and never answers: every read
// lasts until its context ends.
type hangingTarget struct{}

func (hangingTarget) Servers(ctx context.Context) ([]weighter.ServerState, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func (hangingTarget) SetWeights(ctx context.Context, _ []weighter.Change) error {
	<-ctx.Done()
	return ctx.Err()
}

// TestHungBackendDelaysNoOther: the start-up read of a backend whose target
// does not answer (here for a whole 1h cycle timeout) must not hold back the
// other backends' cycles (nor, on SIGHUP, stop them all for that long).
func TestHungBackendDelaysNoOther(t *testing.T) {
	f := newFixture(t)
	hung := &Unit{Backend: &weighter.Backend{Name: "be_hung", Source: &fakeSource{}, Target: hangingTarget{},
		Controller: f.r.unit.Backend.Controller}}
	d := New(testConfig(t, "be"), Options{}) // interval and cycle timeout 1h
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	go func() { d.start(ctx, []*Unit{hung, f.r.unit}, nil); close(started) }()
	defer func() {
		cancel()
		<-started
		d.current().stop()
	}()
	waitFor(t, "the healthy backend's first cycle", func() bool {
		f.src.mu.Lock()
		defer f.src.mu.Unlock()
		return f.src.calls > 0
	})
}
