package haproxy

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

var (
	// ErrNoSession: HAProxy has no stream of that id (it ended), or the id
	// now names another stream.
	ErrNoSession = errors.New("no such session")
	// ErrInvalidSessionID: the id is not of the 0x… form HAProxy prints;
	// nothing was sent.
	ErrInvalidSessionID = errors.New("invalid session id")
)

// ShutdownSession closes the stream id (the ID of a Session of this backend,
// or its Ref): HAProxy aborts both of its connections, so the client sees
// the connection reset or closed. An id not of the form 0x<hex> (with
// @!<pid> after it through the master CLI) is refused before anything is
// sent. A stream that is gone gives an error wrapping ErrNoSession with
// HAProxy's text.
//
// HAProxy reuses a stream's address once the stream ends, so before closing
// it checks, in a first round trip (`show sess <id>`), that the stream is on
// this backend: a stale id must not close another backend's stream. Use
// ShutdownStream to also check it is the very stream that was listed.
func (b *RuntimeBackend) ShutdownSession(ctx context.Context, id string) error {
	s, err := b.refSession(id)
	if err != nil {
		return err
	}
	return b.shutdown(ctx, s, false)
}

// ShutdownStream closes s, a Session this backend's Sessions or
// ServerStreams listed, if its ID still names the same stream (same Serial
// and, when s has one, the same Client) on this backend, in the process it
// was read from (s.Worker, through the master CLI); else it returns an error
// wrapping ErrNoSession and closes nothing. A worker that has exited took its
// streams with it: ErrNoSession too. The check and the close are two round
// trips apart (some 0.1 ms): a stream that ends and whose address is reused
// by a new stream of this backend in between is the one risk left, which
// HAProxy 2.6's CLI offers no way to close.
func (b *RuntimeBackend) ShutdownStream(ctx context.Context, s Session) error {
	if s.Serial == 0 {
		return fmt.Errorf("backend %s: shutdown %s: %w: no serial (not read by Sessions)", b.name, s.ID, ErrInvalidSessionID)
	}
	return b.shutdown(ctx, s, true)
}

// Ref names the stream across HAProxy's processes: its ID, followed by
// "@!<pid>" when it was read from a given worker through the master CLI
// (Worker), the prefix that reaches that worker. ShutdownSession and
// CloseSession take it in place of the ID.
func (s Session) Ref() string {
	if s.Worker == 0 {
		return s.ID
	}
	return s.ID + "@!" + strconv.Itoa(s.Worker)
}

// refSession reads a Ref back into the stream's ID and Worker; it refuses
// anything else before a byte is sent.
func (b *RuntimeBackend) refSession(ref string) (Session, error) {
	id, pid, hasPID := strings.Cut(ref, "@!")
	s := Session{ID: id}
	if hasPID {
		n, err := strconv.Atoi(pid)
		if err != nil || n <= 0 || strconv.Itoa(n) != pid {
			return Session{}, fmt.Errorf("backend %s: shutdown %.40q: %w: want 0x<hex>@!<pid>", b.name, ref, ErrInvalidSessionID)
		}
		if !b.c.cfg.Master {
			return Session{}, fmt.Errorf("backend %s: shutdown %.40q: %w: a worker's stream (@!) is reached through the master CLI only",
				b.name, ref, ErrInvalidSessionID)
		}
		s.Worker = n
	}
	if !isSessionID(id) {
		return Session{}, fmt.Errorf("backend %s: shutdown %.40q: %w: want 0x followed by lowercase hex, as show sess prints it",
			b.name, ref, ErrInvalidSessionID)
	}
	return s, nil
}

// shutdown checks the stream want names (its serial too when exact, its
// client when set) in its process, then closes it there.
func (b *RuntimeBackend) shutdown(ctx context.Context, want Session, exact bool) error {
	id := want.ID
	if !isSessionID(id) {
		return fmt.Errorf("backend %s: shutdown %.40q: %w: want 0x followed by lowercase hex, as show sess prints it",
			b.name, id, ErrInvalidSessionID)
	}
	if err := checkName("backend", b.name); err != nil {
		return err
	}
	what := want.Ref()
	c := b.c.inWorker(want.Worker)
	d, err := c.dumpSessions(ctx, "show sess "+id, nil)
	if err != nil {
		return fmt.Errorf("backend %s: shutdown %s: %w", b.name, what, sessionError(want.Worker, err))
	}
	// `show sess <id>` dumps the one stream at that address; HAProxy's CLI
	// stream is never it (it would be our own).
	if len(d.sessions) != 1 || d.sessions[0].ID != id {
		return fmt.Errorf("backend %s: shutdown %s: %w (gone while being read, %d streams in reply)",
			b.name, what, ErrNoSession, len(d.sessions))
	}
	s := d.sessions[0]
	if s.Backend != b.name {
		return fmt.Errorf("backend %s: shutdown %s: %w: it is now stream #%d of backend %q",
			b.name, what, ErrNoSession, s.Serial, s.Backend)
	}
	if exact && s.Serial != want.Serial {
		return fmt.Errorf("backend %s: shutdown %s: %w: stream #%d ended, the id now names stream #%d",
			b.name, what, ErrNoSession, want.Serial, s.Serial)
	}
	if want.Client != "" && s.Client != want.Client {
		// A client's address and port name one connection at a time,
		// whichever process accepted it: a stream of another client is
		// not the one listed, whatever its id and serial.
		return fmt.Errorf("backend %s: shutdown %s: %w: it is now the stream of client %s, not %s",
			b.name, what, ErrNoSession, s.Client, want.Client)
	}
	replies, err := c.roundTrip(ctx, []string{"shutdown session " + id})
	if err != nil {
		return fmt.Errorf("backend %s: shutdown %s: %w", b.name, what, sessionError(want.Worker, err))
	}
	if err := replyError(replies[0]); err != nil {
		return fmt.Errorf("backend %s: shutdown %s: %w", b.name, what, sessionError(want.Worker, err))
	}
	return nil
}

// sessionError maps HAProxy's "Session not found." (show sess <id>) and "No
// such session (use 'show sess')." (shutdown session) to ErrNoSession,
// keeping HAProxy's text; and, for a stream of an old worker (worker != 0),
// the master's answer that the worker is not there: it exited, and its
// streams with it.
func sessionError(worker int, err error) error {
	if err == nil {
		return nil
	}
	if worker != 0 && workerGone(err) {
		return fmt.Errorf("%w: worker %d has exited (%w)", ErrNoSession, worker, err)
	}
	var msg haproxyMessage
	text := err.Error()
	if errors.As(err, &msg) {
		text = string(msg)
	}
	if strings.Contains(text, "Session not found") || strings.Contains(text, "No such session") {
		return fmt.Errorf("%w (haproxy: %s)", ErrNoSession, text)
	}
	return err
}
