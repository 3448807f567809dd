// Package lvs writes weights to an IPVS (Linux Virtual Server) virtual service
// instead of an HAProxy backend. A Service implements weighter.Target over
// generic netlink, through github.com/cloudflare/ipvs, which — unlike
// moby/ipvs — fails at once on a kernel without ip_vs instead of silently
// doing nothing.
//
// Weights are written read-modify-write: the destination is read from the
// kernel, only its Weight is changed, and the whole destination is written
// back. The kernel's "set destination" replaces every field, so a
// destination built from scratch would, for example, turn DirectRoute into
// Masquerade.
package lvs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"sync"
	"syscall"

	"github.com/cloudflare/ipvs"

	"github.com/haproxy-weighter/haproxy-weighter/internal/ownzero"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// Service is one IPVS virtual service; it implements weighter.Target.
type Service struct {
	spec  string
	svc   ipvs.Service
	names names
	log   *slog.Logger

	mu      sync.Mutex // serialises netlink use and guards conn and initial
	conn    conn
	initial map[netip.AddrPort]int // weight when first seen, reported as InitialWeight
	// redial opens a new netlink connection, for when ip_vs was unloaded
	// and loaded again under us; nil where there is none (tests).
	redial func() (conn, error)
	// zeroes is the record of the quiesces this process made (target.go).
	zeroes *ownzero.Record

	countMu sync.Mutex // guards count (ReadLocal)
	count   countState
}

var _ weighter.Target = (*Service)(nil)

// New validates cfg, opens netlink and checks that the service exists. On a
// kernel without ip_vs the error wraps ErrNoKernelSupport. zeroes is the
// record of the quiesces this process made, which its owner (the daemon)
// hands every Service it builds; nil: the Service keeps its own.
func New(cfg Config, zeroes *ownzero.Record, log *slog.Logger) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c, err := dial()
	if err != nil {
		return nil, err
	}
	s, err := newService(cfg, c, zeroes, log)
	if err != nil {
		c.Close()
		return nil, err
	}
	s.redial = dial
	return s, nil
}

// newService is New with the netlink connection supplied, for tests.
func newService(cfg Config, c conn, zeroes *ownzero.Record, log *slog.Logger) (*Service, error) {
	svc, err := parseService(cfg.Service)
	if err != nil {
		return nil, err
	}
	n, err := parseServers(cfg.Servers)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if zeroes == nil {
		zeroes = &ownzero.Record{}
	}
	s := &Service{spec: cfg.Service, svc: svc, names: n, log: log.With("ipvs_service", cfg.Service),
		conn: c, initial: map[netip.AddrPort]int{}, zeroes: zeroes}
	if err := s.Check(context.Background()); err != nil {
		return nil, err
	}
	return s, nil
}

// Check reports whether the virtual service exists in the kernel.
func (s *Service) Check(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.checkLocked(ctx)
}

// checkLocked looks the service up. Netlink calls to the local kernel take
// no deadline in the library and do not wait on the network, so the context
// is honoured between calls rather than during them.
func (s *Service) checkLocked(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("ipvs: service %s: %w", s.spec, err)
	}
	_, err := s.conn.Service(s.svc)
	if errors.Is(err, os.ErrNotExist) {
		if err = s.reconnectLocked(err); err != nil {
			return err
		}
		_, err = s.conn.Service(s.svc)
	}
	if err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("ipvs: service %s not found in the kernel: %w", s.spec, err)
		}
		return fmt.Errorf("ipvs: look up service %s: %w", s.spec, err)
	}
	return nil
}

// reconnectLocked replaces the netlink connection after ENOENT, the kernel's
// answer for a generic netlink family it does not know: ip_vs was unloaded
// since the connection was opened. Loaded again, it has a new family id that
// only a new connection looks up; until then, the error says IPVS is gone.
func (s *Service) reconnectLocked(cause error) error {
	if s.redial == nil {
		return fmt.Errorf("ipvs: service %s: %w: %w", s.spec, ErrNoKernelSupport, cause)
	}
	c, err := s.redial()
	if err != nil {
		return fmt.Errorf("ipvs: service %s: reconnect after ip_vs was unloaded: %w", s.spec, err)
	}
	if err := s.conn.Close(); err != nil {
		s.log.Warn("ipvs netlink close failed", "err", err, "reason", "ip_vs was unloaded")
	}
	s.conn = c
	s.log.Warn("ip_vs reloaded", "effect", "netlink connection reopened")
	return nil
}

// Close releases the netlink socket.
func (s *Service) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conn.Close()
}
