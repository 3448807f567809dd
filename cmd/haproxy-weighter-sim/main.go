// The haproxy-weighter-sim binary runs the simulator (package sim): a seeded model of one
// HAProxy backend with the real weighter in the loop, used to choose the defaults and to
// compare balancing strategies. It is a separate binary so that the daemon, which runs on
// every balancer, does not link the simulator and its plotting libraries.
package main

import (
	"fmt"
	"io"
	"os"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/haproxy-weighter/haproxy-weighter/cmd/internal/cli"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() { os.Exit(execute(newRootCmd(os.Stdout, os.Stderr), os.Args[1:])) }

// execute runs the command line and returns the process exit code: 0, 1 when
// the simulation failed, 2 when the command line itself is wrong.
func execute(root *cobra.Command, args []string) int { return cli.Execute(root, args, nil) }

// newRootCmd builds the command line afresh (cobra keeps flag values in the command).
func newRootCmd(stdout, stderr io.Writer) *cobra.Command {
	f := newSimulateFlags()
	root := &cobra.Command{
		Use:   "haproxy-weighter-sim",
		Short: "Compare balancing strategies on a simulated backend (the real weighter in the loop)",
		Long: `haproxy-weighter-sim runs a seeded model of one HAProxy backend carrying long-lived
connections of heavy-tailed rates, with HAProxy's own placement (leastconn, roundrobin), an
agent-check peer, the daemon as it ships (its own cycle, weighter.RunCycle, reading a simulated
HAProxy's fast signal calibrated by a delayed metric: the row marked *), every weighting
function fed the delayed metric alone, and an oracle lower bound, and prints their balance
figures side by side.

With no flags it runs the default scenario (~1 s), then compares the shipped daemon (*) with
leastconn, the oracle and the shipped daemon with shedding over the lab's six scenarios and the
production world's six (connections living hours, bursts of heavy clients, a balancer restarting,
rates drifting, 20,000 connections): --world all, at --seeds seeds (2: under a minute on 2 cores;
4 for the figures of docs/research/production-world.md), in full (no scenario shortened). --quick, --scenario
or any flag that shapes the scenario (--duration, --seed, --servers, ...) or adds a custom row
(--function, ...) runs that one scenario alone. Flags override the scenario file. --world,
--fresh, --shed and --sweep run other comparisons instead.`,
		Version: fmt.Sprintf("%s (%s)", version, runtime.Version()),
		Args:    cli.Args(cobra.NoArgs),
		RunE:    func(cmd *cobra.Command, _ []string) error { return runSimulate(cmd, f) },
	}
	// The daemon's logging flags, accepted and checked as `haproxy-weighter simulate`
	// did, and hidden: the simulator logs nothing.
	cli.SetupRoot(root, stdout, stderr, true)
	root.SetVersionTemplate("haproxy-weighter-sim {{.Version}}\n")
	addSimulateFlags(root.Flags(), f)
	return root
}
