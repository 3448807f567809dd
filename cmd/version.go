package cmd

import (
	"fmt"
	"runtime"

	"github.com/prometheus/common/version"
	"github.com/spf13/cobra"

	"github.com/haproxy-weighter/haproxy-weighter/cmd/internal/cli"
)

// addVersion gives root --version and the version command.
func addVersion(root *cobra.Command) {
	// prometheus/common/version carries the version to the build_info
	// metric; the revision it finds in the binary's VCS stamp.
	version.Version = Version
	root.Version = Version
	root.SetVersionTemplate(versionLine(Version))
	root.AddCommand(&cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cli.Args(cobra.NoArgs),
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprint(cmd.OutOrStdout(), versionLine(Version))
		},
	})
}

// versionLine is what `version` and `--version` print.
func versionLine(v string) string {
	return fmt.Sprintf("haproxy-weighter %s (%s)\n", v, runtime.Version())
}
