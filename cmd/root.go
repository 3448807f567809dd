// Package cmd holds the cobra commands of the haproxy-weighter binary. Commands only
// parse flags and wire packages together; the work happens in weighter/, sources/,
// haproxy/ and lvs/. Each command lives in its own file and registers itself in init().
package cmd

import (
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/spf13/cobra"
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
}

// Execute runs the command line and returns the process exit code.
func Execute() int {
	if err := rootCmd.Execute(); err != nil {
		rootCmd.PrintErrln("error:", err)
		return 1
	}
	return 0
}

// Global logging flags.
var (
	logLevel  string
	logFormat string
)

func init() {
	rootCmd.SetOut(os.Stdout)
	rootCmd.SetErr(os.Stderr)
	pf := rootCmd.PersistentFlags()
	pf.StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn or error")
	pf.StringVar(&logFormat, "log-format", "text", "log format: text or json")
}

// newLogger builds the slog logger the global flags ask for, writing to w.
func newLogger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch logFormat {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format: %q is not text or json", logFormat)
}
