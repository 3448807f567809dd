package haproxy

import (
	"context"
	"errors"
	"fmt"
)

// ValidName says why name cannot be sent on the runtime socket as a backend
// or server name, or returns nil. It refuses what Check, Servers and
// SetWeights refuse (checkName), so that validate can reject a configuration
// that run would only fail on at every cycle.
func ValidName(name string) error {
	if name == "" {
		return errors.New("empty name")
	}
	for _, r := range name {
		if !isNameChar(r) {
			return fmt.Errorf("character %q is not allowed in HAProxy names (letters, digits, '.', ':', '_', '-')", r)
		}
	}
	return nil
}

// Algorithms whose server weights can be changed at runtime.
var dynamicAlgos = map[string]bool{"roundrobin": true, "leastconn": true, "random": true}

// Algorithms that refuse or ignore runtime weights whatever the hash type.
var staticAlgos = map[string]string{
	"static-rr": "static-rr only accepts weights 0% and 100% at runtime",
	"first":     "first ignores server weights",
}

// Check verifies at start-up that the backend exists, that the socket accepts
// weight writes (admin level), and that the backend's algorithm honours runtime
// weights. Hash algorithms (source, uri, hdr, ...) look the same in `show stat`
// whether they are consistent or map-based, so for them Check probes: it writes
// a different weight to one server and the old weight back, in one request.
// Map-based hashing refuses the first write. No server at weight 0 is
// probed.
func (b *RuntimeBackend) Check(ctx context.Context) error {
	if err := checkName("backend", b.name); err != nil {
		return err
	}
	replies, err := b.c.roundTrip(ctx, []string{b.stateCmd(), fmt.Sprintf("show stat %s 2 -1", b.name)})
	if err != nil {
		return fmt.Errorf("backend %s: check: %w", b.name, err)
	}
	servers, err := b.parseState(replies[0])
	if err != nil {
		return err
	}
	algo, err := b.backendAlgo(ctx, replies[1])
	if err != nil {
		return err
	}
	if why, ok := staticAlgos[algo]; ok {
		return fmt.Errorf("backend %s: %w: balance %s (%s)", b.name, ErrStaticWeights, algo, why)
	}
	if len(servers) == 0 {
		return nil // nothing to probe; a later write error will say more
	}
	// The probe goes to a server that has a weight: one at 0 (an
	// operator's drain) would take new connections between the two writes.
	// With every server at 0 only the admin-level write of its own weight
	// is sent; a map-based backend then fails at its first write instead.
	s := servers[0]
	for _, cand := range servers {
		if cand.Weight > 0 {
			s = cand
			break
		}
	}
	probe := 1
	if s.InitialWeight == 1 {
		probe = 2
	}
	cmds := []string{b.weightCmd(s.Name, s.Weight)}
	if !dynamicAlgos[algo] && s.Weight > 0 {
		cmds = []string{b.weightCmd(s.Name, probe), b.weightCmd(s.Name, s.Weight)}
	}
	return b.probe(ctx, algo, cmds)
}

func (b *RuntimeBackend) probe(ctx context.Context, algo string, cmds []string) error {
	replies, err := b.c.roundTrip(ctx, cmds)
	if err != nil {
		return fmt.Errorf("backend %s: check: %w", b.name, err)
	}
	for _, r := range replies {
		if err := replyError(r); err != nil {
			err = classify(err)
			if errors.Is(err, ErrStaticWeights) {
				return fmt.Errorf("backend %s: balance %s with hash-type map-based: %w", b.name, algo, err)
			}
			return fmt.Errorf("backend %s: check weight write (is the socket level admin?): %w", b.name, err)
		}
	}
	return nil
}

// backendAlgo reads the "algo" column of the BACKEND row of `show stat <be> 2 -1`.
func (b *RuntimeBackend) backendAlgo(ctx context.Context, reply string) (string, error) {
	t, err := b.c.backendStat(ctx, b.name, reply)
	if err != nil {
		return "", err
	}
	if r, ok := t.backendRow(b.name); ok {
		return t.get(r, "algo"), nil
	}
	return "", fmt.Errorf("backend %s: %w", b.name, ErrNoBackend)
}
