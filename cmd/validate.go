package cmd

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/haproxy-weighter/haproxy-weighter/config"
)

func init() {
	rootCmd.AddCommand(&cobra.Command{
		Use:   "validate FILE",
		Short: "Check a configuration file and say exactly what is wrong and where",
		Long: `validate loads FILE as run does: unknown keys, bad durations, unknown functions and
missing backend fields are reported as file:line: message, one per line. ${VAR}
references must be set in the environment. It exits 0 when the file is valid.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := config.Load(args[0])
			if err != nil {
				return fmt.Errorf("invalid configuration:\n%w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: ok (%d backends)\n", args[0], len(cfg.Backends))
			return nil
		},
	})
}
