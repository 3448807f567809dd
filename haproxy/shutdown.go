package haproxy

import (
	"context"
	"errors"
	"fmt"
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

// ShutdownSession closes the stream id (the ID of a Session of this backend):
// HAProxy aborts both of its connections, so the client sees the connection
// reset or closed. An id not of the form 0x<hex> is refused before anything is
// sent. A stream that is gone gives an error wrapping ErrNoSession with
// HAProxy's text.
//
// HAProxy reuses a stream's address once the stream ends, so before closing
// it checks, in a first round trip (`show sess <id>`), that the stream is on
// this backend: a stale id must not close another backend's stream. Use
// ShutdownStream to also check it is the very stream that was listed.
func (b *Backend) ShutdownSession(ctx context.Context, id string) error {
	return b.shutdown(ctx, id, 0)
}

// ShutdownStream closes s, a Session this backend's Sessions listed, if its ID
// still names the same stream (same Serial) on this backend; else it returns
// an error wrapping ErrNoSession and closes nothing. The check and the close
// are two round trips apart (some 0.1 ms): a stream that ends and whose
// address is reused by a new stream of this backend in between is the one
// risk left, which HAProxy 2.6's CLI offers no way to close.
func (b *Backend) ShutdownStream(ctx context.Context, s Session) error {
	if s.Serial == 0 {
		return fmt.Errorf("backend %s: shutdown %s: %w: no serial (not read by Sessions)", b.name, s.ID, ErrInvalidSessionID)
	}
	return b.shutdown(ctx, s.ID, s.Serial)
}

// shutdown checks id (and serial, unless 0) then closes the stream.
func (b *Backend) shutdown(ctx context.Context, id string, serial uint64) error {
	if !isSessionID(id) {
		return fmt.Errorf("backend %s: shutdown %.40q: %w: want 0x followed by lowercase hex, as show sess prints it",
			b.name, id, ErrInvalidSessionID)
	}
	if err := checkName("backend", b.name); err != nil {
		return err
	}
	d, err := b.c.dumpSessions(ctx, "show sess "+id, nil)
	if err != nil {
		return fmt.Errorf("backend %s: shutdown %s: %w", b.name, id, sessionError(err))
	}
	// `show sess <id>` dumps the one stream at that address; HAProxy's CLI
	// stream is never it (it would be our own).
	if len(d.sessions) != 1 || d.sessions[0].ID != id {
		return fmt.Errorf("backend %s: shutdown %s: %w (gone while being read, %d streams in reply)",
			b.name, id, ErrNoSession, len(d.sessions))
	}
	s := d.sessions[0]
	if s.Backend != b.name {
		return fmt.Errorf("backend %s: shutdown %s: %w: it is now stream #%d of backend %q",
			b.name, id, ErrNoSession, s.Serial, s.Backend)
	}
	if serial != 0 && s.Serial != serial {
		return fmt.Errorf("backend %s: shutdown %s: %w: stream #%d ended, the id now names stream #%d",
			b.name, id, ErrNoSession, serial, s.Serial)
	}
	replies, err := b.c.roundTrip(ctx, []string{"shutdown session " + id})
	if err != nil {
		return fmt.Errorf("backend %s: shutdown %s: %w", b.name, id, err)
	}
	if err := replyError(replies[0]); err != nil {
		return fmt.Errorf("backend %s: shutdown %s: %w", b.name, id, sessionError(err))
	}
	return nil
}

// sessionError maps HAProxy's "Session not found." (show sess <id>) and "No
// such session (use 'show sess')." (shutdown session) to ErrNoSession,
// keeping HAProxy's text.
func sessionError(err error) error {
	if err == nil {
		return nil
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
