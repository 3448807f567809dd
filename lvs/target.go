package lvs

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sort"

	"github.com/cloudflare/ipvs"

	"github.com/haproxy-weighter/haproxy-weighter/internal/ownzero"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// zeroKey is the key of a destination in the Service's record of the
// quiesces (weight 0) this process made. Any other weight 0 is someone
// else's (keepalived's inhibit_on_failure, an operator) and SetWeights does
// not write over it.
func (s *Service) zeroKey(addr netip.AddrPort) ownzero.Key {
	return ownzero.Key{Target: "ipvs", Group: s.spec, Server: addr.String()}
}

// destination is one real server as read from the kernel, with its name.
type destination struct {
	name     string
	addr     netip.AddrPort
	dest     ipvs.Destination
	sessions int // open connections, IPVS's counterpart of HAProxy's scur
}

// Servers reads every destination of the service. IPVS has no admin or health
// state of its own (keepalived removes dead servers), so each destination is
// reported ready and up; weight 0 is IPVS's quiesced state.
func (s *Service) Servers(ctx context.Context) ([]weighter.ServerState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sent := s.zeroes.ReadSent()
	dests, err := s.readLocked(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]weighter.ServerState, 0, len(dests))
	present := make(map[netip.AddrPort]bool, len(dests))
	for _, d := range dests {
		w := int(d.dest.Weight)
		present[d.addr] = true
		if w != 0 {
			// The daemon's quiesce is gone: a later 0 is someone else's.
			s.zeroes.Seen(s.zeroKey(d.addr), sent)
		}
		if _, seen := s.initial[d.addr]; !seen {
			s.initial[d.addr] = w
		}
		out = append(out, weighter.ServerState{
			Name: d.name, Address: d.addr.String(), Weight: w, InitialWeight: s.initial[d.addr],
			Admin: weighter.AdminReady, Operational: "up", Sessions: d.sessions,
			OwnZero: w == 0 && s.zeroes.Ours(s.zeroKey(d.addr)),
		})
	}
	// A destination that left and comes back is a new real server, with the
	// weight it comes back with; and a long-lived daemon must not keep every
	// address it ever saw.
	for a := range s.initial {
		if !present[a] {
			delete(s.initial, a)
		}
	}
	return out, nil
}

// SetWeights writes each change read-modify-write: the destination just read
// from the kernel is written back with only Weight changed. Per-server
// failures are joined *weighter.ServerError values; the others are still
// written. A batch with a weight out of range or a server changed twice is
// refused whole: nothing is written. A destination at weight 0 that this
// process did not quiesce keeps it (a ServerError): keepalived or an
// operator set it, maybe after the cycle read the weights.
func (s *Service) SetWeights(ctx context.Context, changes []weighter.Change) error {
	if len(changes) == 0 {
		return nil
	}
	if err := s.validate(changes); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	dests, err := s.readLocked(ctx)
	if err != nil {
		return err
	}
	byName := make(map[string]destination, len(dests))
	for _, d := range dests {
		byName[d.name] = d
	}
	var errs []error
	for _, c := range changes {
		if err := s.setLocked(ctx, byName, c); err != nil {
			errs = append(errs, &weighter.ServerError{Server: c.Server, Err: err})
			continue
		}
		s.log.Debug("weight set", "server", c.Server, "weight", c.Weight)
	}
	return errors.Join(errs...)
}

// validate refuses the whole batch if a weight is out of range or a server
// comes twice (weighter.RefuseBatch).
func (s *Service) validate(changes []weighter.Change) error {
	return weighter.RefuseBatch("ipvs: service "+s.spec, changes, nil)
}

func (s *Service) setLocked(ctx context.Context, byName map[string]destination, c weighter.Change) error {
	d, ok := byName[c.Server]
	if !ok {
		return fmt.Errorf("no destination named %q in ipvs service %s", c.Server, s.spec)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("ipvs: service %s: weight of %s not written: %w", s.spec, d.addr, err)
	}
	if d.dest.Weight == 0 && c.Weight != 0 && !s.zeroes.Ours(s.zeroKey(d.addr)) {
		// Quiesced by someone else since the cycle read it (keepalived does
		// it once, when a check fails): a weight now would put a dead
		// server back in rotation for good.
		return fmt.Errorf("ipvs: service %s: destination %s was set to weight 0 by someone else since it was read (keepalived, an operator); left at 0", s.spec, d.addr)
	}
	dest := d.dest
	dest.Weight = uint32(c.Weight)
	if err := s.conn.UpdateDestination(s.svc, dest); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			// The kernel's "set destination" answers ENOENT for a destination
			// removed since the read (keepalived, an operator); it does not
			// create one, and neither do we.
			return fmt.Errorf("ipvs: service %s: destination %s is gone (removed since it was read), not re-added: %w", s.spec, d.addr, err)
		}
		return fmt.Errorf("ipvs: service %s: update destination %s: %w", s.spec, d.addr, err)
	}
	s.zeroes.Wrote(s.zeroKey(d.addr), c.Weight)
	return nil
}

// readLocked reads the service's destinations, named and sorted by name. The
// service is looked up first because the kernel answers a destination dump
// of a missing service with an empty list.
func (s *Service) readLocked(ctx context.Context) ([]destination, error) {
	if err := s.checkLocked(ctx); err != nil {
		return nil, err
	}
	raw, err := s.conn.Destinations(s.svc)
	if err != nil {
		return nil, fmt.Errorf("ipvs: read destinations of %s: %w", s.spec, err)
	}
	out := make([]destination, 0, len(raw))
	owner := make(map[string]netip.AddrPort, len(raw))
	for _, r := range raw {
		ap := netip.AddrPortFrom(r.Address.Unmap(), r.Port)
		name := s.names.nameOf(ap)
		if prev, dup := owner[name]; dup {
			return nil, fmt.Errorf("ipvs: destinations %s and %s of %s both map to server %q; map them by ip:port", prev, ap, s.spec, name)
		}
		owner[name] = ap
		out = append(out, destination{name: name, addr: ap, dest: r.Destination, sessions: s.sessions(r)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

// sessions is a destination's open connections. IPVS counts every new
// connection inactive and only TCP and SCTP make it active once established
// (their inactive ones are opening or closing); a UDP connection stays
// inactive for its whole life, so a UDP service's are active + inactive. A
// fwmark service may mix protocols: its active ones are the TCP/SCTP ones.
func (s *Service) sessions(d ipvs.DestinationExtended) int {
	n := int(d.ActiveConnections)
	if s.svc.FWMark == 0 && s.svc.Protocol == ipvs.UDP {
		n += int(d.InactiveConnections)
	}
	return n
}
