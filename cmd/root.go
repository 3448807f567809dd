// Package cmd holds the cobra commands of the haproxy-weighter binary. Commands only
// parse flags and wire packages together; the work happens in weighter/, sources/,
// haproxy/ and lvs/. Each command lives in its own file and registers itself in init().
package cmd

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/haproxy-weighter/haproxy-weighter/cmd/internal/cliflags"
)

// Version is set at build time with -ldflags "-X .../cmd.Version=...".
var Version = "dev"

var rootCmd = &cobra.Command{
	Use:   "haproxy-weighter",
	Short: "Keep long-lived connections evenly balanced by setting HAProxy (or IPVS) weights from measured load",
	Long: `haproxy-weighter reads each backend server's load from Graphite, Prometheus or HAProxy's
own statistics, turns the loads into weights (1..256) with a weighting function, and writes
them over the HAProxy runtime socket (or to an IPVS virtual service), so that new connections
go to the least loaded servers.`,
	SilenceUsage:  true,
	SilenceErrors: true,
	// Check the global flags for every command, also those that do not log (calc).
	PersistentPreRunE: func(*cobra.Command, []string) error {
		_, err := newLogger(io.Discard)
		return err
	},
}

// Root returns the binary's command tree (each command adds itself in its file's init), for
// the tools that generate its man pages and shell completion from it (tools/gendocs).
func Root() *cobra.Command { return rootCmd }

// Execute runs the command line and returns the process exit code: 0, 1 when
// the command failed, 2 when the command line itself is wrong.
func Execute() int {
	c, err := rootCmd.ExecuteC()
	if err == nil {
		return 0
	}
	rootCmd.PrintErrln("error:", err)
	var ue usageError
	// cobra's unknown-command error has no type of its own.
	if errors.As(err, &ue) || strings.HasPrefix(err.Error(), "unknown command ") {
		path := c.CommandPath()
		if c == simulateMovedCmd {
			path = simulatorBinary
		}
		rootCmd.PrintErrf("Run '%s --help' for usage.\n", path)
		return 2
	}
	return 1
}

// usageError is a wrong command line (unknown flag, wrong arguments), which a
// script or systemd must be able to tell from a failed run.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }

func (e usageError) Unwrap() error { return e.err }

// usageArgs marks the errors of an argument check as usage errors.
func usageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		if err := check(c, args); err != nil {
			return usageError{err}
		}
		return nil
	}
}

// Global logging flags.
var (
	logLevel  string
	logFormat string
)

// simulatorBinary is the command the simulator moved to, so that the daemon, which
// runs on every balancer, does not link the simulator and its plotting libraries.
const simulatorBinary = "haproxy-weighter-sim"

// simulateMovedCmd keeps `haproxy-weighter simulate ...` from failing as an unknown
// command: it exits 2 (a wrong command line) and prints the command to run instead,
// with the same arguments, which haproxy-weighter-sim takes unchanged.
var simulateMovedCmd = &cobra.Command{
	Use:                "simulate",
	Short:              "Moved to " + simulatorBinary,
	Hidden:             true,
	DisableFlagParsing: true, // any simulate flag reaches RunE, --help included
	RunE: func(_ *cobra.Command, args []string) error {
		return usageError{fmt.Errorf("simulate moved to its own command; run: %s", shellJoin(append([]string{simulatorBinary}, args...)))}
	},
}

// shellJoin quotes the words that a shell would split or expand.
func shellJoin(words []string) string {
	quoted := make([]string, len(words))
	for i, w := range words {
		quoted[i] = w
		if w == "" || strings.IndexFunc(w, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=,@%+", r))
		}) >= 0 {
			quoted[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
		}
	}
	return strings.Join(quoted, " ")
}

func init() {
	rootCmd.AddCommand(simulateMovedCmd)
	rootCmd.SetOut(os.Stdout)
	rootCmd.SetErr(os.Stderr)
	rootCmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	pf := rootCmd.PersistentFlags()
	pf.StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn or error")
	pf.StringVar(&logFormat, "log-format", "text", "log format: text or json")
}

// newLogger builds the slog logger the global flags ask for, writing to w.
func newLogger(w io.Writer) (*slog.Logger, error) {
	log, err := cliflags.NewLogger(w, logLevel, logFormat)
	if err != nil {
		return nil, usageError{err}
	}
	return log, nil
}
