package daemon

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/internal/duration"
	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
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
	hung := &managedBackend{Backend: &weighter.Weigher{Name: "be_hung", Source: &fakeSource{}, Target: hangingTarget{},
		Controller: newFixture(t).r.unit.Backend.Controller}}
	d := New(testConfig(t, "be"), Options{}) // interval and cycle timeout 1h
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	go func() { d.start(ctx, []*managedBackend{hung, f.r.unit}, nil); close(started) }()
	defer func() {
		cancel()
		<-started
		d.current().stop()
	}()
	testenv.WaitFor(t, "the healthy backend's first cycle", func() bool {
		f.src.mu.Lock()
		defer f.src.mu.Unlock()
		return f.src.calls > 0
	})
}

// TestCancelledStartUpReadIsNoError: a reload or shutdown that ends a backend's
// start-up read is not a failure of that backend; no ERROR line may say so.
func TestCancelledStartUpReadIsNoError(t *testing.T) {
	var logs testenv.SyncBuffer
	reading := make(chan struct{}, 1)
	u := &managedBackend{Backend: &weighter.Weigher{Name: "be", Source: &fakeSource{},
		Target: signallingTarget{hangingTarget{}, reading}, Controller: newFixture(t).r.unit.Backend.Controller}}
	d := New(testConfig(t, "be"), Options{Log: slog.New(slog.NewTextHandler(&logs, nil))})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d.start(ctx, []*managedBackend{u}, nil)
	<-reading
	d.current().stop() // as a reload does
	if strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("a cancelled start-up read was logged as an error:\n%s", logs.String())
	}
}

// signallingTarget says when a read has started.
type signallingTarget struct {
	hangingTarget
	reading chan struct{}
}

func (s signallingTarget) Servers(ctx context.Context) ([]weighter.ServerState, error) {
	s.reading <- struct{}{}
	return s.hangingTarget.Servers(ctx)
}

// slowTarget takes a whole cycle timeout on the fake clock to fail each read;
// on the second read (the first cycle's) it asks the daemon, just before the
// timeout, whether the backend's loop looks stuck.
type slowTarget struct {
	hangingTarget
	clock   *testenv.Clock
	timeout time.Duration
	reads   int
	check   func()
}

func (s *slowTarget) Servers(context.Context) ([]weighter.ServerState, error) {
	s.reads++
	s.clock.Advance(s.timeout - time.Second)
	if s.reads == 2 {
		s.check()
	}
	s.clock.Advance(time.Second)
	return nil, errors.New("timeout")
}

// TestSlowStartIsNotAStuckLoop: with timeout > 2 intervals (allowed) and an
// HAProxy slow to answer at start, the start-up read and the first cycle
// take up to two timeouts. The loop turns all along: neither the watchdog
// nor /healthz may call it stuck (that gets the daemon killed at start).
func TestSlowStartIsNotAStuckLoop(t *testing.T) {
	clock := testenv.NewClock()
	cfg := testConfig(t, "be")
	cfg.Interval, cfg.Timeout = duration.Duration(10*time.Second), duration.Duration(30*time.Second)
	d := New(cfg, Options{Clock: clock})
	var stuck *runner
	tgt := &slowTarget{clock: clock, timeout: time.Duration(cfg.Timeout), check: func() { stuck = d.stuck() }}
	u := &managedBackend{Backend: &weighter.Weigher{Name: "be", Source: &fakeSource{}, Target: tgt,
		Controller: newFixture(t).r.unit.Backend.Controller}}
	ctx, cancel := context.WithCancel(context.Background())
	d.start(ctx, []*managedBackend{u}, nil)
	<-clock.Waits() // the first cycle has ended
	cancel()
	d.current().stop()
	if tgt.reads != 2 {
		t.Fatalf("%d reads, want the start-up read and the first cycle's", tgt.reads)
	}
	if stuck != nil {
		t.Error("a loop busy with its start-up read and first cycle was called stuck")
	}
}
