package haproxy

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// pinCmd is one stick-table write of a batch: its client and command.
type pinCmd struct {
	client string
	cmd    string
	id     int    // set: the server id written
	server string // set: the server it names
}

// SetWeightsAndPins writes, in ONE batch (batch.go: weighed against the time
// left at the backend's pace, once sent read to the end), `clear table <be>
// key <ip>` for each of pins.Clear, the weights as SetWeights writes them,
// then `set table <be> key <ip> data.server_id <id>` for each of pins.Set,
// and the read-back `show servers state`. Clear comes first: a pin beats a
// drain, so a pin on a server this batch drains must be gone before.
//
// With no pins it is SetWeights. The weights' errors are SetWeights'. A pin
// that cannot be written (a client that is not an IP address, an IPv6
// client in a `type ip` table, a server without an id, a client twice) is
// not sent, and one HAProxy refuses is reported: each a *weighter.PinError,
// joined with the others; the rest of the batch is written. A backend
// without a pin table gets its weights alone and an error wrapping
// weighter.ErrNoPinTable. A table that may have had no room for the new pins
// (HAProxy then evicts other entries silently, see pins.go) adds an error
// wrapping weighter.ErrPinTableFull.
func (b *RuntimeBackend) SetWeightsAndPins(ctx context.Context, changes []weighter.Change, pins weighter.PinChanges) error {
	if pins.Empty() {
		return b.SetWeights(ctx, changes)
	}
	if err := checkName("backend", b.name); err != nil {
		return err
	}
	if len(changes) > 0 {
		if err := b.validate(changes); err != nil {
			return err
		}
	}
	typ, ids, err := b.pinContext(ctx, pins.Set)
	if errors.Is(err, weighter.ErrNoPinTable) {
		return errors.Join(b.SetWeights(ctx, changes), err)
	}
	if err != nil {
		return fmt.Errorf("backend %s: set weights and pins: %w (nothing sent)", b.name, err)
	}
	clears, sets, refused := b.pinCmds(typ, ids, pins)
	if len(clears)+len(sets) == 0 {
		return errors.Join(append([]error{b.SetWeights(ctx, changes)}, refused...)...)
	}

	cmds := make([]string, 0, len(clears)+len(changes)+len(sets)+2)
	for _, p := range clears {
		cmds = append(cmds, p.cmd)
	}
	for _, ch := range changes {
		cmds = append(cmds, b.weightCmd(ch.Server, ch.Weight))
	}
	if len(sets) > 0 {
		// The table's header just before the new pins: HAProxy says nothing
		// when it evicts entries to make room. No entry has a negative
		// server_id, so this lists the header alone.
		cmds = append(cmds, fmt.Sprintf("show table %s data.server_id lt 0", b.name))
	}
	for _, p := range sets {
		cmds = append(cmds, p.cmd)
	}
	cmds = append(cmds, b.stateCmd())

	replies, err := b.c.batch(ctx, cmds, &b.pace, true)
	if err != nil {
		err = fmt.Errorf("backend %s: set weights and pins: %w", b.name, cutBatch(cmds, err))
		if !sent(err) {
			return errors.Join(append([]error{err}, refused...)...)
		}
		b.unconfirmed(changes)
		return errors.Join(append([]error{&weighter.UnconfirmedError{Sent: changes, Err: err}}, refused...)...)
	}

	errs := refused
	for i, p := range clears {
		if err := replyError(replies[i]); err != nil {
			errs = append(errs, &weighter.PinError{Client: p.client,
				Err: fmt.Errorf("backend %s: clear table: %w", b.name, err)})
		}
	}
	at := len(clears)
	weights := append(append([]string(nil), replies[at:at+len(changes)]...), replies[len(replies)-1])
	if len(changes) > 0 {
		if err := b.verify(changes, weights); err != nil {
			errs = append(errs, err)
		}
	}
	at += len(changes)
	if len(sets) > 0 {
		if err := b.roomFor(replies[at], len(sets)); err != nil {
			errs = append(errs, err)
		}
		at++
	}
	now, idErr := b.readBackIDs(replies[len(replies)-1])
	for i, p := range sets {
		if err := replyError(replies[at+i]); err != nil {
			errs = append(errs, &weighter.PinError{Client: p.client,
				Err: fmt.Errorf("backend %s: set table: %w", b.name, classifyPin(err))})
			continue
		}
		if idErr == nil && now[p.id] != p.server {
			errs = append(errs, &weighter.PinError{Client: p.client,
				Err: fmt.Errorf("backend %s: pinned to server id %d for %s, which now names %q (the servers changed since they were read)",
					b.name, p.id, p.server, now[p.id])})
		}
	}
	return errors.Join(errs...)
}

// pinContext is what pins are written with: the table's type and the
// servers' ids, as the backend's last reads left them (Pins, Servers), or
// read now when one is not known (first write, or a server the last read
// did not have).
func (b *RuntimeBackend) pinContext(ctx context.Context, set []weighter.Pin) (string, map[int]string, error) {
	b.mu.Lock()
	typ, ids := b.tableType, b.serverIDs
	b.mu.Unlock()
	known := (typ == "ip" || typ == "ipv6") && ids != nil
	if known {
		names := make(map[string]bool, len(ids))
		for _, n := range ids {
			names[n] = true
		}
		for _, p := range set {
			known = known && names[p.Server]
		}
	}
	if known {
		return typ, ids, nil
	}
	replies, err := b.c.roundTrip(ctx, []string{"show table", b.stateCmd()})
	if err != nil {
		return "", nil, fmt.Errorf("read pin table and servers: %w", err)
	}
	if _, err := b.parseState(replies[1]); err != nil {
		return "", nil, err
	}
	info, err := findTable(b.name, replies[0])
	if err != nil {
		return "", nil, err
	}
	b.keepTableType(info.typ)
	ids = scanServerIDs(replies[1])
	b.keepIDs(ids)
	return info.typ, ids, nil
}

// pinCmds turns pins into commands, and the pins that cannot be written
// into *weighter.PinError.
func (b *RuntimeBackend) pinCmds(typ string, ids map[int]string, pins weighter.PinChanges) (clears, sets []pinCmd, refused []error) {
	refuse := func(client string, err error) {
		refused = append(refused, &weighter.PinError{Client: client,
			Err: fmt.Errorf("backend %s: not sent: %w", b.name, err)})
	}
	seen := make(map[string]bool)
	for _, client := range pins.Clear {
		key, err := pinKey(typ, client)
		switch {
		case err != nil:
			refuse(client, err)
		case seen[key]:
			refuse(client, errors.New("cleared twice in one batch"))
		default:
			seen[key] = true
			clears = append(clears, pinCmd{client: client, cmd: fmt.Sprintf("clear table %s key %s", b.name, key)})
		}
	}
	byName := make(map[string]int, len(ids))
	for id, name := range ids {
		byName[name] = id
	}
	seen = make(map[string]bool)
	for _, p := range pins.Set {
		key, err := pinKey(typ, p.Client)
		id, ok := byName[p.Server]
		switch {
		case err != nil:
			refuse(p.Client, err)
		case !ok:
			refuse(p.Client, fmt.Errorf("server %q: %w", p.Server, ErrNoServer))
		case seen[key]:
			refuse(p.Client, errors.New("pinned twice in one batch"))
		default:
			seen[key] = true
			sets = append(sets, pinCmd{client: p.Client, id: id, server: p.Server,
				cmd: fmt.Sprintf("set table %s key %s data.server_id %d", b.name, key, id)})
		}
	}
	return clears, sets, refused
}

// roomFor reads the table's header taken just before n new pins were
// written: if they may not all have fitted, HAProxy evicted entries to make
// room, silently (pins.go). n counts pins that move a client already in the
// table as new: a table that close to full is worth saying too.
func (b *RuntimeBackend) roomFor(reply string, n int) error {
	if err := commandError(reply); err != nil {
		b.keepTableType("") // gone (a reload): the next batch looks again
		return fmt.Errorf("backend %s: pin table: %w", b.name, classifyPin(err))
	}
	info, ok := parseTableHeader(strings.SplitN(reply, "\n", 2)[0])
	if !ok || info.name != b.name {
		return fmt.Errorf("backend %s: pin table: %w: header %.80q", b.name, ErrBadReply, reply)
	}
	// A reload may have changed the table's type: the next batch writes
	// keys in the new one's form.
	b.keepTableType(info.typ)
	if info.size > 0 && info.used+n > info.size {
		return fmt.Errorf("backend %s: %w: %d of %d entries used before %d pins were written; HAProxy evicts entries silently to make room, so other pins may be gone (raise the stick-table's size)",
			b.name, weighter.ErrPinTableFull, info.used, info.size, n)
	}
	return nil
}

// readBackIDs is the server ids of the batch's read-back `show servers
// state` (kept for the next batch).
func (b *RuntimeBackend) readBackIDs(reply string) (map[int]string, error) {
	if _, err := b.parseState(reply); err != nil {
		return nil, err
	}
	ids := scanServerIDs(reply)
	b.keepIDs(ids)
	return ids, nil
}

// classifyPin says which of HAProxy's refusals of a table command means the
// table is gone (a reload without it).
func classifyPin(err error) error {
	if strings.Contains(err.Error(), "No such table") {
		return fmt.Errorf("%w (%s)", weighter.ErrNoPinTable, err)
	}
	return err
}

// cutBatch says how far HAProxy got through a batch of mixed commands whose
// round trip was cut (cutWeights for a batch of weights alone).
func cutBatch(cmds []string, err error) error {
	var cut *cutAfter
	if !errors.As(err, &cut) {
		return err
	}
	answered := min(max(cut.replies-2, 0), len(cmds))
	if answered == len(cmds) {
		return fmt.Errorf("all %d commands answered, read-back cut: %w", len(cmds), err)
	}
	return fmt.Errorf("%d of %d commands answered, no reply from %q on (applied or not: unknown): %w",
		answered, len(cmds), cmds[answered], err)
}
