package haproxy

import (
	"context"
	"errors"
	"fmt"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

var _ weighter.SessionCloser = (*Backend)(nil)

// CloseSession closes the stream s names, if its ID still names that very
// stream (same Serial) on this backend (ShutdownStream). A stream that ended
// meanwhile gives an error wrapping weighter.ErrSessionGone: nothing was
// closed, and nothing needed to be.
func (b *Backend) CloseSession(ctx context.Context, s weighter.ShedSession) error {
	err := b.ShutdownStream(ctx, Session{ID: s.ID, Serial: s.Serial})
	if errors.Is(err, ErrNoSession) {
		return fmt.Errorf("%w: %w", weighter.ErrSessionGone, err)
	}
	return err
}
