package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// restorer is a target that can keep its current weights and later put them
// back (haproxy.RuntimeBackend; IPVS cannot, so restore_on_exit leaves it alone).
type restorer interface {
	weighter.Target
	Snapshot(ctx context.Context) (map[string]int, error)
	Restore(ctx context.Context) error
}

// startWeights keeps, per backend, the target that holds the weights the
// backend had before the daemon's first write to it, for restore_on_exit. It
// belongs to the daemon, not to a configuration: a reload that keeps a
// backend keeps them (by then the backend's weights are the daemon's own).
type startWeights struct {
	log  *slog.Logger
	mu   sync.Mutex
	kept map[string]*restoringTarget
}

func newStartWeights(log *slog.Logger) *startWeights {
	return &startWeights{log: log, kept: map[string]*restoringTarget{}}
}

// wrap returns t decorated so that it keeps the backend's start-up weights
// before it is read or written; a target that cannot restore is returned as is.
func (s *startWeights) wrap(backend string, t weighter.Target) weighter.Target {
	r, ok := t.(restorer)
	if !ok {
		return t
	}
	return &restoringTarget{restorer: r, backend: backend, start: s}
}

// has reports whether the backend's start-up weights are kept.
func (s *startWeights) has(backend string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.kept[backend] != nil
}

// forget drops the named backends' start-up weights.
func (s *startWeights) forget(names []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, name := range names {
		delete(s.kept, name)
	}
}

// restore writes back the start-up weights of the named backends that have
// them, within timeout. The backends are restored side by side, each with
// the whole timeout: one whose HAProxy hangs must not use up the time of
// those behind another socket. A restored backend's weights are dropped, so a
// backend configured again later starts from what it has then; one that
// failed keeps them. The error names each backend that failed.
func (s *startWeights) restore(ctx context.Context, timeout time.Duration, names []string, why string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		s.mu.Lock()
		t := s.kept[name]
		s.mu.Unlock()
		if t == nil {
			continue
		}
		wg.Go(func() {
			if err := t.Restore(ctx); err != nil {
				s.log.Error("restore failed", "backend", name, "restore", why, "err", err, "effect", "the daemon's last weights stay")
				errs[i] = fmt.Errorf("%s: backend %s: %w", why, name, err)
				return
			}
			s.mu.Lock()
			delete(s.kept, name)
			s.mu.Unlock()
			s.log.Info("weights restored", "backend", name, "restore", why)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// restoringTarget is a Target that, for restore_on_exit, keeps its backend's
// weights before anything is read or written through it, and can put them
// back. Until they are kept every call fails, so nothing is written that could
// not be restored: a backend whose HAProxy was down at start keeps them when
// HAProxy answers. Keeping them at the first read, not the first write, takes
// the weights as the operator left them, before the daemon plans from them.
type restoringTarget struct {
	restorer
	backend string
	start   *startWeights
}

// Servers keeps the start-up weights, then reads the servers.
func (t *restoringTarget) Servers(ctx context.Context) ([]weighter.ServerState, error) {
	if err := t.keep(ctx); err != nil {
		return nil, err
	}
	return t.restorer.Servers(ctx)
}

// SetWeights keeps the start-up weights, then writes.
func (t *restoringTarget) SetWeights(ctx context.Context, changes []weighter.Change) error {
	if err := t.keep(ctx); err != nil {
		return err
	}
	return t.restorer.SetWeights(ctx, changes)
}

// CloseSession closes a session through the target it wraps: keeping the
// start-up weights must not turn shedding off. A target that cannot close
// sessions (IPVS) says so, as it would unwrapped.
func (t *restoringTarget) CloseSession(ctx context.Context, s weighter.ShedSession) error {
	closer, ok := t.restorer.(weighter.SessionCloser)
	if !ok {
		return errors.New("the target cannot close sessions")
	}
	return closer.CloseSession(ctx, s)
}

// Pins reads the pin table through the target it wraps: keeping the
// start-up weights must not turn pinning off. A target without a pin table
// (IPVS) has none.
func (t *restoringTarget) Pins(ctx context.Context) (weighter.PinTable, error) {
	pt, ok := t.restorer.(weighter.PinTarget)
	if !ok {
		return weighter.PinTable{}, fmt.Errorf("%w: the target has no stick table", weighter.ErrNoPinTable)
	}
	return pt.Pins(ctx)
}

// SetWeightsAndPins keeps the start-up weights, then writes the weights and
// the pins in one batch through the target it wraps (the weights alone
// through one without a pin table).
func (t *restoringTarget) SetWeightsAndPins(ctx context.Context, changes []weighter.Change, pins weighter.PinChanges) error {
	if err := t.keep(ctx); err != nil {
		return err
	}
	pt, ok := t.restorer.(weighter.PinTarget)
	if !ok {
		if !pins.Empty() {
			return errors.Join(t.restorer.SetWeights(ctx, changes),
				fmt.Errorf("%w: the target has no stick table", weighter.ErrNoPinTable))
		}
		return t.restorer.SetWeights(ctx, changes)
	}
	return pt.SetWeightsAndPins(ctx, changes, pins)
}

// keep snapshots the target unless the backend's start-up weights are kept
// already (by this target, or by the one a reload replaced).
func (t *restoringTarget) keep(ctx context.Context) error {
	if t.start.has(t.backend) {
		return nil
	}
	weights, err := t.Snapshot(ctx)
	if err != nil {
		return fmt.Errorf("read start-up weights for restore_on_exit, writing nothing until then: %w", err)
	}
	t.start.mu.Lock()
	t.start.kept[t.backend] = t
	t.start.mu.Unlock()
	t.start.log.Info("start-up weights kept for restore_on_exit", "backend", t.backend, "servers", len(weights))
	return nil
}

// restore writes back the start-up weights of the backends still configured,
// and of those a reload removed whose restore failed then (their HAProxy did
// not answer): they would otherwise keep the daemon's weights for good.
func (d *Daemon) restore(ctx context.Context) error {
	cfg := d.config()
	if !cfg.RestoreOnExit {
		return nil
	}
	names := make([]string, 0, len(cfg.Backends))
	for _, b := range cfg.Backends {
		names = append(names, b.Name)
	}
	for _, name := range d.startWeights.names() {
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	unpinErr := d.unpin(ctx, cfg.CycleTimeout())
	return errors.Join(unpinErr, d.startWeights.restore(ctx, cfg.CycleTimeout(), names, "restore_on_exit"))
}

// names returns the backends whose start-up weights are kept, sorted.
func (s *startWeights) names() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(maps.Keys(s.kept))
}
