// Package cmd holds the cobra commands of the haproxy-weighter binary. Commands only
// parse flags and wire packages together; the work happens in weighter/, sources/,
// haproxy/ and lvs/. Each command lives in its own file as a constructor (newRunCmd, …)
// that NewRoot calls: no command is a package variable.
package cmd

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/haproxy-weighter/haproxy-weighter/cmd/internal/cli"
)

// Version is set at build time with -ldflags "-X .../cmd.Version=...".
var Version = "dev"

// NewRoot builds the binary's command tree afresh, writing to stdout and
// stderr (cobra keeps flag values in the commands, so each command line gets
// its own tree). The man pages and shell completion are generated from it
// too (tools/gendocs).
func NewRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "haproxy-weighter",
		Short: "Keep long-lived connections evenly balanced by setting HAProxy (or IPVS) weights from measured load",
		Long: `haproxy-weighter reads each backend server's load from Graphite, Prometheus or HAProxy's
own statistics, turns the loads into weights (1..256) with a weighting function, and writes
them over the HAProxy runtime socket (or to an IPVS virtual service), so that new connections
go to the least loaded servers.`,
	}
	logging := cli.SetupRoot(root, stdout, stderr, false)
	root.AddCommand(newRunCmd(logging), newOnceCmd(logging), newValidateCmd(), newCalcCmd(), newSimulateMovedCmd())
	addVersion(root)
	return root
}

// Execute runs the command line and returns the process exit code: 0, 1 when
// the command failed, 2 when the command line itself is wrong.
func Execute() int { return executeArgs(os.Args[1:], os.Stdout, os.Stderr) }

// executeArgs runs args on a fresh command tree.
func executeArgs(args []string, stdout, stderr io.Writer) int {
	return cli.Execute(NewRoot(stdout, stderr), args, func(c *cobra.Command) string {
		if c.Name() == simulateMovedName && c.Parent() != nil && c.Parent().Parent() == nil {
			return simulatorBinary
		}
		return c.CommandPath()
	})
}

// simulatorBinary is the command the simulator moved to, so that the daemon, which
// runs on every balancer, does not link the simulator and its plotting libraries.
const simulatorBinary = "haproxy-weighter-sim"

// simulateMovedName is the command the simulator had in this binary.
const simulateMovedName = "simulate"

// newSimulateMovedCmd keeps `haproxy-weighter simulate ...` from failing as an
// unknown command: it exits 2 (a wrong command line) and prints the command to
// run instead, with the same arguments, which haproxy-weighter-sim takes
// unchanged.
func newSimulateMovedCmd() *cobra.Command {
	return &cobra.Command{
		Use:                simulateMovedName,
		Short:              "Moved to " + simulatorBinary,
		Hidden:             true,
		DisableFlagParsing: true, // any simulate flag reaches RunE, --help included
		RunE: func(_ *cobra.Command, args []string) error {
			return cli.Usage(fmt.Errorf("simulate moved to its own command; run: %s", shellJoin(append([]string{simulatorBinary}, args...))))
		},
	}
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
