package weighter

import (
	"errors"
	"fmt"
)

// ErrInvalidWeight marks a weight outside 0..MaxWeight in a batch a target refused.
var ErrInvalidWeight = errors.New("invalid weight")

// RefuseBatch checks a batch of changes before a target writes any of it, and
// returns nil or an error that joins a batch-level message ("<target>: nothing
// written: n of m changes refused") with one ServerError per refused change: a
// server named twice, a weight outside 0..MaxWeight, or what the target's own
// check refuses (nil: none; HAProxy checks names it cannot carry). A bad change means a bug upstream, and half of a
// buggy plan is no better than none, so a target writes all or nothing; the
// per-server errors keep every caller from reading the others as written.
func RefuseBatch(target string, changes []Change, check func(Change) error) error {
	var errs []error
	seen := make(map[string]bool, len(changes))
	for _, ch := range changes {
		var err error
		if check != nil {
			err = check(ch)
		}
		switch {
		case err != nil:
		case seen[ch.Server]:
			err = fmt.Errorf("more than one change in the batch (weight %d)", ch.Weight)
		case !ValidWeight(ch.Weight):
			err = fmt.Errorf("%w: %d outside 0..%d", ErrInvalidWeight, ch.Weight, MaxWeight)
		}
		seen[ch.Server] = true
		if err != nil {
			errs = append(errs, &ServerError{Server: ch.Server, Err: err})
		}
	}
	if len(errs) == 0 {
		return nil
	}
	batch := fmt.Errorf("%s: nothing written: %d of %d changes refused", target, len(errs), len(changes))
	return errors.Join(append([]error{batch}, errs...)...)
}
