package haproxy

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// RuntimeBackend is one HAProxy backend through the runtime socket: a
// weighter.Target, and what else the daemon reads of it (stats, streams).
type RuntimeBackend struct {
	c    *Client
	name string

	now func() time.Time // the clock reads are stamped with (tests set it)

	mu       sync.Mutex
	snapshot map[string]snapWeight // weights read by Snapshot, for Restore
	recent   *statsRead            // the `show stat` of the last Servers, for ReadStats

	// pace is how fast HAProxy answered this backend's batches of weights
	// (batch.go): a backend's own, as a weight costs HAProxy more on a big
	// random or consistent-hash backend than on a roundrobin one.
	pace pace

	// serverIDs (srv_id → name) and tableType (the pin table's: ip or
	// ipv6) are what the newest reads said, for writing pins (pins.go).
	serverIDs map[int]string
	tableType string
	// noTable is the last "no pin table" answer and until when it stands
	// (pins.go): most backends have none, and asking every cycle would
	// cost HAProxy a `show table` per backend per cycle for nothing.
	noTable      error
	noTableUntil time.Time
}

var _ weighter.Target = (*RuntimeBackend)(nil)

// Name is the backend's name in HAProxy.
func (b *RuntimeBackend) Name() string { return b.name }

// Servers reads every server of the backend, fresh from HAProxy: current and
// initial weight, admin state (from srv_admin_state bits), operational state and
// address. A missing backend is an error wrapping ErrNoBackend.
func (b *RuntimeBackend) Servers(ctx context.Context) ([]weighter.ServerState, error) {
	if err := checkName("backend", b.name); err != nil {
		return nil, err
	}
	// One round trip reads both the state (weights, admin and operational
	// state) and the stats (open sessions, which the controller's
	// connection_life estimate uses).
	sent := b.c.zeroes.ReadSent()
	replies, err := b.c.roundTrip(ctx, []string{b.stateCmd(), statCmd(b.name)})
	if err != nil {
		return nil, fmt.Errorf("backend %s: %w", b.name, err)
	}
	servers, err := b.parseState(replies[0])
	if err != nil {
		return nil, err
	}
	b.keepIDs(scanServerIDs(replies[0]))
	if err := b.fillSessions(ctx, servers, replies[1]); err != nil {
		return nil, err
	}
	for i, s := range servers {
		if s.Weight != 0 {
			// The daemon's 0 is gone (an HAProxy restart): a later 0 is not its.
			b.c.zeroes.Seen(b.zeroKey(s.Name), sent)
			continue
		}
		servers[i].OwnZero = b.c.zeroes.Ours(b.zeroKey(s.Name))
	}
	return servers, nil
}

// statCmd asks for the backend and server rows (types 2+4) of one backend: the
// BACKEND row tells a backend's (maybe empty) server list from a frontend's.
func statCmd(backend string) string { return fmt.Sprintf("show stat %s 6 -1", backend) }

// fillSessions sets each server's Sessions from HAProxy's scur.
func (b *RuntimeBackend) fillSessions(ctx context.Context, servers []weighter.ServerState, reply string) error {
	t, err := b.c.backendStat(ctx, b.name, reply)
	if err != nil {
		return err
	}
	stats, err := serverStats(b.name, t)
	if err != nil {
		return err
	}
	b.keepStats(stats)
	sessions := make(map[string]int, len(stats))
	for _, s := range stats {
		sessions[s.Server] = int(s.CurrentSessions)
	}
	for i := range servers {
		servers[i].Sessions = sessions[servers[i].Name]
	}
	return nil
}

func (b *RuntimeBackend) stateCmd() string { return "show servers state " + b.name }

func (b *RuntimeBackend) parseState(reply string) ([]weighter.ServerState, error) {
	if err := commandError(reply); err != nil {
		return nil, fmt.Errorf("backend %s: %w", b.name, classify(err))
	}
	return parseServersState(b.name, reply)
}

// SetWeights writes all changes through one connection in one request, followed by
// a `show servers state` that verifies them. Every weight is validated first; if any
// is invalid nothing is sent. A request that would not end before ctx's deadline
// (at the pace of the ones before) is not sent either (ErrNoTimeForBatch); one
// sent is read to the end past it (batch.go). Failures of single servers come
// back joined, each a *weighter.ServerError; a transport failure after the
// request was sent is a *weighter.UnconfirmedError, one before it is returned
// as is (nothing is retried).
func (b *RuntimeBackend) SetWeights(ctx context.Context, changes []weighter.Change) error {
	return b.setWeights(ctx, changes, true)
}

// setWeights is SetWeights; mayHold says whether a batch that would not end
// in time is held back (a cycle's: the next cycle writes) or sent anyway.
func (b *RuntimeBackend) setWeights(ctx context.Context, changes []weighter.Change, mayHold bool) error {
	if len(changes) == 0 {
		return nil
	}
	if err := b.validate(changes); err != nil {
		return err
	}
	cmds := make([]string, 0, len(changes)+1)
	for _, ch := range changes {
		cmds = append(cmds, b.weightCmd(ch.Server, ch.Weight))
	}
	cmds = append(cmds, b.stateCmd())
	replies, err := b.c.batch(ctx, cmds, &b.pace, mayHold)
	if err != nil {
		err = fmt.Errorf("backend %s: set weights: %w", b.name, cutWeights(changes, err))
		if !sent(err) {
			return err
		}
		b.unconfirmed(changes)
		return &weighter.UnconfirmedError{Sent: changes, Err: err}
	}
	return b.verify(changes, replies)
}

// unconfirmed records the 0s of a batch whose replies were lost as the
// daemon's own drains: if HAProxy took one, it is; if not, the next read
// finds the server at another weight and ends the record (ownzero.Seen).
// Any other weight leaves the record as it was, since a 0 the daemon wrote
// before may still stand.
func (b *RuntimeBackend) unconfirmed(changes []weighter.Change) {
	for _, ch := range changes {
		if ch.Weight == 0 {
			b.c.zeroes.Wrote(b.zeroKey(ch.Server), 0)
		}
	}
}

// cutWeights says how far HAProxy got through a batch whose round trip was
// cut (HAProxy silent for a timeout, or restarted: a batch sent is not cut
// at the cycle's deadline, batch.go). It stays one error, not one per
// server: the process that took the answered weights may be gone (a
// restart), so none counts as written; SetWeights returns it as a
// *weighter.UnconfirmedError, and the next cycle reads what HAProxy has and
// takes a weight it finds as sent for its own.
func cutWeights(changes []weighter.Change, err error) error {
	var cut *cutAfter
	if !errors.As(err, &cut) {
		return err
	}
	// The first two replies are the session set-up (exchange).
	answered := min(max(cut.replies-2, 0), len(changes))
	if answered == len(changes) {
		return fmt.Errorf("all %d weights answered, read-back cut: %w", len(changes), err)
	}
	return fmt.Errorf("%d of %d weights answered, no reply from %s on (applied or not: unknown): %w",
		answered, len(changes), changes[answered].Server, err)
}

func (b *RuntimeBackend) weightCmd(server string, w int) string {
	return fmt.Sprintf("set server %s/%s weight %d", b.name, server, w)
}

// validate refuses the whole batch if one weight or name is invalid or a server
// comes twice (weighter.RefuseBatch), and checks each name and weight with the
// rules HAProxy applies.
func (b *RuntimeBackend) validate(changes []weighter.Change) error {
	if err := checkName("backend", b.name); err != nil {
		return err
	}
	// The weight range (0..256) is weighter.ValidWeight, the rule HAProxy
	// applies; TestWeightRuleMatchesClientNative keeps it in step with
	// client-native's, which the daemon does not link (it would add 2 MB).
	return weighter.RefuseBatch("backend "+b.name, changes, func(ch weighter.Change) error {
		return checkName("server", ch.Server)
	})
}

// verify attributes each reply to its server and compares the read-back weights.
func (b *RuntimeBackend) verify(changes []weighter.Change, replies []string) error {
	var errs []error
	failed := make(map[string]bool)
	for i, ch := range changes {
		if err := replyError(replies[i]); err != nil {
			failed[ch.Server] = true
			errs = append(errs, &weighter.ServerError{Server: ch.Server,
				Err: fmt.Errorf("backend %s: set weight %d: %w", b.name, ch.Weight, classify(err))})
			continue
		}
		b.c.zeroes.Wrote(b.zeroKey(ch.Server), ch.Weight)
	}
	state, err := b.parseState(replies[len(changes)])
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("read back: %w", err))...)
	}
	got := make(map[string]int, len(state))
	for _, s := range state {
		got[s.Name] = s.Weight
	}
	for _, ch := range changes {
		if w, ok := got[ch.Server]; !failed[ch.Server] && (!ok || w != ch.Weight) {
			errs = append(errs, &weighter.ServerError{Server: ch.Server,
				Err: fmt.Errorf("backend %s: wrote weight %d, read back %d (present %v)", b.name, ch.Weight, w, ok)})
		}
	}
	return errors.Join(errs...)
}
