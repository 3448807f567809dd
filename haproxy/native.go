package haproxy

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/haproxytech/client-native/v5/runtime"
	"github.com/haproxytech/client-native/v5/runtime/options"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// SetWeightsEach writes changes one server at a time through client-native's
// SetServerWeight: one connection per server and no read-back. It is the
// per-server path, kept as the baseline of the batching benchmark and for
// callers that want client-native's own validation and error texts. Unix
// sockets only (client-native dials nothing else); it checks ctx between servers.
func (b *Backend) SetWeightsEach(ctx context.Context, changes []weighter.Change) error {
	if err := b.validate(changes); err != nil {
		return err
	}
	if b.c.cfg.network() != "unix" {
		return fmt.Errorf("backend %s: client-native needs a unix socket, have %q", b.name, b.c.cfg.Socket)
	}
	rt, err := runtime.New(ctx, options.Socket(b.c.cfg.Socket), options.DoNotCheckRuntimeOnInit)
	if err != nil {
		return fmt.Errorf("backend %s: client-native: %w", b.name, err)
	}
	var errs []error
	for _, ch := range changes {
		if err := ctx.Err(); err != nil {
			return errors.Join(append(errs, err)...)
		}
		if err := rt.SetServerWeight(b.name, ch.Server, strconv.Itoa(ch.Weight)); err != nil {
			errs = append(errs, &weighter.ServerError{Server: ch.Server,
				Err: fmt.Errorf("backend %s: set weight %d: %w", b.name, ch.Weight, classify(err))})
		}
	}
	return errors.Join(errs...)
}
