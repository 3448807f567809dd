// Package cliflags holds what both binaries, haproxy-weighter and
// haproxy-weighter-sim, do with their command lines alike. It must not import
// the simulator (the daemon links it) nor the daemon (the simulator does).
package cliflags

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/spf13/pflag"

	"github.com/haproxy-weighter/haproxy-weighter/internal/errs"
)

// PolicyError rewrites the problems of a policy made from the flags in fs in
// terms of the flags: "max_step must be > 1" becomes "--max-step must be > 1".
// A problem whose key has no flag keeps its wording.
func PolicyError(fs *pflag.FlagSet, err error) error {
	var out []error
	for _, leaf := range errs.Leaves(err) {
		msg := leaf.Error()
		key, rest, _ := strings.Cut(msg, " ")
		if flag := strings.ReplaceAll(key, "_", "-"); fs.Lookup(flag) != nil {
			msg = "--" + flag + " " + rest
		}
		out = append(out, errors.New(msg))
	}
	return errors.Join(out...)
}

// NewLogger builds the slog logger that --log-level and --log-format ask
// for, writing to w; the error names the wrong flag.
func NewLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: l}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format: %q is not text or json", format)
}
