package cmd

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/haproxy-weighter/haproxy-weighter/cmd/internal/cli"
	"github.com/haproxy-weighter/haproxy-weighter/config"
	"github.com/haproxy-weighter/haproxy-weighter/daemon"
	"github.com/haproxy-weighter/haproxy-weighter/peers"
	"github.com/haproxy-weighter/haproxy-weighter/sourcekind"
)

func newValidateCmd() *cobra.Command {
	var flagPath string
	var haproxyConfig *haproxyConfigFlag
	c := &cobra.Command{
		Use:   "validate FILE | validate --config FILE",
		Short: "Check a configuration file and say exactly what is wrong and where",
		Long: `validate loads FILE as run does: unknown keys, bad durations, unknown functions,
missing backend fields and backend or server_map names HAProxy's runtime socket cannot
carry are reported as file:line: message, one per line, naming keys, never values.
${VAR} references must be set in the environment. FILE must be a regular file. It
exits 0 when the file is valid.

With haproxy.config_file (or --haproxy-config), it reads HAProxy's configuration
and prints, one "file:line: warning:" line each, what in it keeps the backends from being
weighted (the warnings run logs at start); warnings do not change the exit code,
a file that cannot be read does.`,
		Args: cli.Args(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := flagPath
			switch {
			case len(args) == 1 && path != "":
				return cli.Usage(errors.New("give the file either as an argument or with --config, not both"))
			case len(args) == 1:
				path = args[0]
			case path == "":
				return cli.Usage(errors.New("no configuration file: validate FILE or validate --config FILE"))
			}
			cfg, err := config.Load(path)
			if err != nil {
				return fmt.Errorf("invalid configuration:\n%w", err)
			}
			if err := buildSources(path, cfg); err != nil {
				return fmt.Errorf("invalid configuration:\n%w", err)
			}
			if err := daemon.CheckWebConfig(cfg.WebConfigFile); err != nil {
				return fmt.Errorf("invalid configuration:\n%s: %w", path, err)
			}
			if err := peers.CheckClient(cfg); err != nil {
				return fmt.Errorf("invalid configuration:\n%s: %w", path, err)
			}
			printWarnings(cmd.ErrOrStderr(), cfg)
			haproxyConfig.apply(cfg)
			if err := printHAProxyWarnings(cmd.ErrOrStderr(), cfg); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: ok (%d backends)\n", path, len(cfg.Backends))
			return nil
		},
	}
	c.Flags().StringVarP(&flagPath, "config", "c", "", "configuration file (same as the argument)")
	haproxyConfig = addHAProxyConfigFlag(c)
	return c
}

// buildSources makes the sources as run does, without contacting them, so
// that what only their constructors check (TLS files) fails here and not at
// start. A source that reads HAProxy has nothing to build without the socket.
// Each problem is one "file: backend name: message" line.
func buildSources(path string, cfg *config.Config) error {
	var problems []error
	for _, b := range cfg.Backends {
		if b.Source.NeedsHAProxy() {
			continue
		}
		if _, err := sourcekind.Build(b.Source, sourcekind.Env{Backend: b.Name}); err != nil {
			problems = append(problems, fmt.Errorf("%s: backend %s: %w", path, b.Name, err))
		}
	}
	return errors.Join(problems...)
}
