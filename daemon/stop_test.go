package daemon

import (
	"context"
	"testing"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/internal/duration"
	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// wedgedSource never returns from Fetch until the test ends, whatever its
// context says (a source that ignores its deadline).
type wedgedSource struct {
	fetching chan struct{}
	release  chan struct{}
}

func (s *wedgedSource) Fetch(context.Context, []weighter.ServerState) (weighter.Loads, error) {
	s.fetching <- struct{}{}
	<-s.release
	return nil, context.Canceled
}

// TestStopDoesNotHangOnAWedgedBackend: shutdown (and so restore_on_exit) and
// reload must not wait forever for a backend whose source or target ignores
// its timeout; the other backends are still stopped and closed.
func TestStopDoesNotHangOnAWedgedBackend(t *testing.T) {
	f := newFixture(t)
	src := &wedgedSource{fetching: make(chan struct{}, 1), release: make(chan struct{})}
	t.Cleanup(func() { close(src.release) })
	wedged := &managedBackend{Backend: &weighter.Weigher{Name: "be_wedged", Source: src, Target: &fakeTarget{weights: map[string]int{}},
		Controller: newFixture(t).r.unit.Backend.Controller}}
	cfg := testConfig(t, "be")
	cfg.Timeout = duration.Duration(10 * time.Millisecond)
	d := New(cfg, Options{})
	d.grace = 10 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	d.start(ctx, []*managedBackend{wedged, f.r.unit}, nil)
	<-src.fetching
	cancel() // SIGTERM
	stopped := make(chan []string, 1)
	go func() { stopped <- d.current().stop() }()
	var stuck []string
	testenv.WaitFor(t, "stop to give up on the wedged backend", func() bool {
		select {
		case stuck = <-stopped:
			return true
		default:
			return false
		}
	})
	if len(stuck) != 1 || stuck[0] != "be_wedged" {
		t.Errorf("stuck %v, want [be_wedged]", stuck)
	}
}
