package haproxy

import (
	"context"
	"fmt"

	"github.com/haproxy-weighter/haproxy-weighter/internal/ownzero"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// zeroKey is the key of one of the backend's servers in the Client's record
// of the weight-0 drains this process made: Restore undoes those and no other.
func (b *RuntimeBackend) zeroKey(server string) ownzero.Key {
	return ownzero.Key{Target: b.c.cfg.Socket, Group: b.name, Server: server}
}

// snapWeight is one server's weight at Snapshot time, with the configured
// (initial) weight it had then, to tell whether the configuration changed since.
type snapWeight struct {
	weight, initial int
}

// Snapshot reads and remembers the current weight of every server, so that
// Restore can put them back when the daemon exits (opt-in). A later Snapshot
// replaces the earlier one.
func (b *RuntimeBackend) Snapshot(ctx context.Context) (map[string]int, error) {
	servers, err := b.Servers(ctx)
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	snap := make(map[string]snapWeight, len(servers))
	out := make(map[string]int, len(servers))
	for _, s := range servers {
		snap[s.Name] = snapWeight{weight: s.Weight, initial: s.InitialWeight}
		out[s.Name] = s.Weight
	}
	b.mu.Lock()
	b.snapshot = snap
	b.mu.Unlock()
	return out, nil
}

// Restore writes back the weights remembered by Snapshot, where they differ.
// A server whose configured weight changed since (HAProxy restarted with a new
// configuration), or that did not exist then, gets its configured weight: the
// old runtime weight would undo the operator's change, and the daemon's weight
// would outlive the daemon. A server at weight 0 that the daemon did not
// drain (this process's newest write to it was not 0) is an operator's
// drain, as the cycles take it, and stays drained; one at 0 at Snapshot time
// that is back in service gets its configured weight, not the 0. Without a
// Snapshot it does nothing.
func (b *RuntimeBackend) Restore(ctx context.Context) error {
	b.mu.Lock()
	snap := b.snapshot
	b.mu.Unlock()
	if snap == nil {
		return nil
	}
	servers, err := b.Servers(ctx)
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	var changes []weighter.Change
	for _, s := range servers {
		want := s.InitialWeight
		if w, ok := snap[s.Name]; ok && w.initial == s.InitialWeight {
			want = w.weight
		}
		if s.Weight == 0 && want != 0 && !b.c.zeroes.Ours(b.zeroKey(s.Name)) {
			continue // drained by an operator since: not the daemon's to undo
		}
		if want == 0 && s.Weight != 0 {
			// At 0 at start and put back in service since (the daemon
			// never lifts a 0 it did not write): not drained again.
			if want = s.InitialWeight; want == 0 {
				continue
			}
		}
		if want != s.Weight {
			changes = append(changes, weighter.Change{Server: s.Name, Weight: want})
		}
	}
	// Not held back for time (batch.go): a restore is asked for once, at
	// exit or when the backend leaves; there is no next cycle to write it.
	if err := b.setWeights(ctx, changes, false); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	return nil
}
