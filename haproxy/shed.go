package haproxy

import (
	"context"
	"errors"
	"fmt"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

var _ weighter.SessionCloser = (*RuntimeBackend)(nil)

// CloseSession closes the stream s names, if its ID (a Session's Ref: with
// the worker it was read from, through the master CLI) still names that very
// stream (same Serial and client) on this backend, in that process
// (ShutdownStream). A stream that ended meanwhile gives an error wrapping
// weighter.ErrSessionGone: nothing was closed, and nothing needed to be.
func (b *RuntimeBackend) CloseSession(ctx context.Context, s weighter.ShedSession) error {
	ref, err := b.refSession(s.ID)
	if err != nil {
		return err
	}
	ref.Serial, ref.Client = s.Serial, s.Client
	err = b.ShutdownStream(ctx, ref)
	if errors.Is(err, ErrNoSession) {
		return fmt.Errorf("%w: %w", weighter.ErrSessionGone, err)
	}
	return err
}
