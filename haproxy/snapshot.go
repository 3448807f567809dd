package haproxy

import (
	"context"
	"fmt"
	"maps"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// Snapshot reads and remembers the current weight of every server, so that
// Restore can put them back when the daemon exits (opt-in). A later Snapshot
// replaces the earlier one.
func (b *Backend) Snapshot(ctx context.Context) (map[string]int, error) {
	servers, err := b.Servers(ctx)
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	snap := make(map[string]int, len(servers))
	for _, s := range servers {
		snap[s.Name] = s.Weight
	}
	b.mu.Lock()
	b.snapshot = snap
	b.mu.Unlock()
	return maps.Clone(snap), nil
}

// Restore writes back the weights remembered by Snapshot for the servers that
// still exist and whose weight differs. Without a Snapshot it does nothing.
func (b *Backend) Restore(ctx context.Context) error {
	b.mu.Lock()
	snap := maps.Clone(b.snapshot)
	b.mu.Unlock()
	if len(snap) == 0 {
		return nil
	}
	servers, err := b.Servers(ctx)
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	var changes []weighter.Change
	for _, s := range servers {
		if w, ok := snap[s.Name]; ok && w != s.Weight {
			changes = append(changes, weighter.Change{Server: s.Name, Weight: w})
		}
	}
	if err := b.SetWeights(ctx, changes); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	return nil
}
