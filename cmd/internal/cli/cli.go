// Package cli holds what both binaries, haproxy-weighter and
// haproxy-weighter-sim, do with their command lines alike: how a root command
// is set up (output, usage errors, the logging flags), how a command line is
// executed into an exit code, and how flag problems are worded. It must not
// import the simulator (the daemon links it) nor the daemon (the simulator
// does).
package cli

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/spf13/cobra"
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

// UsageError is a wrong command line (unknown flag, wrong arguments, a flag
// value out of range), which a script or systemd must be able to tell from a
// failed run: Execute exits 2 for it, 1 for any other error.
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }

func (e UsageError) Unwrap() error { return e.Err }

// Usage marks err as a wrong command line.
func Usage(err error) error { return UsageError{err} }

// Args marks the errors of an argument check as usage errors.
func Args(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		if err := check(c, args); err != nil {
			return UsageError{err}
		}
		return nil
	}
}

// Logging is the global --log-level and --log-format of a command tree.
type Logging struct{ level, format string }

// Logger builds the slog logger the flags ask for, writing to w; a wrong
// flag is a usage error that names it.
func (l *Logging) Logger(w io.Writer) (*slog.Logger, error) {
	log, err := NewLogger(w, l.level, l.format)
	if err != nil {
		return nil, UsageError{err}
	}
	return log, nil
}

// SetupRoot makes root a binary's root command as both binaries' are: errors
// and usage printed once by Execute (not by cobra), output to stdout and
// stderr, a flag cobra cannot parse a usage error, and the persistent
// logging flags, checked before any command runs (also one that does not
// log). hideLogging hides them from --help (the simulator takes them for
// compatibility and logs nothing).
func SetupRoot(root *cobra.Command, stdout, stderr io.Writer, hideLogging bool) *Logging {
	root.SilenceUsage, root.SilenceErrors = true, true
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return UsageError{err} })
	l := &Logging{}
	pf := root.PersistentFlags()
	pf.StringVar(&l.level, "log-level", "info", "log level: debug, info, warn or error")
	pf.StringVar(&l.format, "log-format", "text", "log format: text or json")
	if hideLogging {
		_ = pf.MarkHidden("log-level")
		_ = pf.MarkHidden("log-format")
	}
	root.PersistentPreRunE = func(*cobra.Command, []string) error {
		_, err := l.Logger(io.Discard)
		return err
	}
	return l
}

// Execute runs root on args and returns the process exit code: 0, 1 when
// the command failed, 2 when the command line itself is wrong (then the
// hint names helpFor(c)'s --help; nil: the command's own path).
func Execute(root *cobra.Command, args []string, helpFor func(*cobra.Command) string) int {
	root.SetArgs(args)
	c, err := root.ExecuteC()
	if err == nil {
		return 0
	}
	root.PrintErrln("error:", err)
	var ue UsageError
	// cobra's unknown-command error has no type of its own.
	if errors.As(err, &ue) || strings.HasPrefix(err.Error(), "unknown command ") {
		path := c.CommandPath()
		if helpFor != nil {
			path = helpFor(c)
		}
		root.PrintErrf("Run '%s --help' for usage.\n", path)
		return 2
	}
	return 1
}
