// Package field says, as a value, which key of the configuration an error is
// about, so that the configuration's loader finds the key's line in the file
// without reading the message.
package field

import (
	"errors"
	"fmt"
)

// Error is a problem of one key. Keys is the path to it from the value that
// was validated (["query"], ["basic_auth", "username"]); the message is Err's,
// unchanged.
type Error struct {
	Keys []string
	Err  error
}

func (e *Error) Error() string { return e.Err.Error() }

func (e *Error) Unwrap() error { return e.Err }

// Errorf returns fmt.Errorf(format, args...) as a problem of key.
func Errorf(key, format string, args ...any) error {
	return &Error{Keys: []string{key}, Err: fmt.Errorf(format, args...)}
}

// Wrap returns err as a problem of the key path keys; nil stays nil.
func Wrap(err error, keys ...string) error {
	if err == nil {
		return nil
	}
	return &Error{Keys: keys, Err: err}
}

// Keys returns the key path of the first Error in err's tree, or nil: a
// problem of the validated value as a whole.
func Keys(err error) []string {
	if e := (*Error)(nil); errors.As(err, &e) {
		return e.Keys
	}
	return nil
}
