package weighter

import (
	"maps"
	"slices"
	"time"
)

// Inherit takes over old's record of what was closed (the sheds of the last
// minute, each client's last shed) and the fast read it last planned from.
// A reload that changes a backend's shed policy builds a new Shedder; without
// this, max_per_minute and every client's cooldown would start from nothing
// at each such reload. Which servers are hot is not taken over: it was
// judged by the old policy's above and for.
func (s *Shedder) Inherit(old *Shedder) {
	if old == nil || old == s {
		return
	}
	old.mu.Lock()
	recent, clients, read := slices.Clone(old.recent), maps.Clone(old.clients), old.read
	old.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recent = append(s.recent, recent...)
	for addr, t := range clients {
		if last, ok := s.clients[addr]; !ok || t.After(last) {
			s.clients[addr] = t
		}
	}
	if read.After(s.read) {
		s.read = read
	}
}

// newRead reports whether the fast read made at is one the Shedder has not
// planned from yet, and records it. An unknown time (zero) is always new.
func (s *Shedder) newRead(at time.Time) bool {
	if at.IsZero() {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if at.Equal(s.read) {
		return false
	}
	s.read = at
	return true
}

// tried counts n closes whose outcome is unknown (the target failed)
// against max_per_minute, as if they had closed: a close that timed out
// may have happened. They start no cooldown.
func (s *Shedder) tried(now time.Time, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.recent = append(s.recent, now)
	}
}
