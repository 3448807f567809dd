// Package cmd holds the cobra commands of the haproxy-weighter binary. Commands only
// parse flags and wire packages together; the work happens in weighter/, sources/,
// haproxy/ and lvs/. Each command lives in its own file and registers itself in init().
package cmd

import (
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

func init() {
	rootCmd.SetOut(os.Stdout)
	rootCmd.SetErr(os.Stderr)
}
