package cmd

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/haproxy-weighter/haproxy-weighter/config"
)

// haproxyConfigFlag is --haproxy-config, which sets haproxy.config_file (over
// the configuration file's, if any).
type haproxyConfigFlag struct {
	path string
	cmd  *cobra.Command
}

func addHAProxyConfigFlag(c *cobra.Command) *haproxyConfigFlag {
	f := &haproxyConfigFlag{cmd: c}
	c.Flags().StringVar(&f.path, "haproxy-config", "",
		"HAProxy's configuration file (haproxy.config_file): warn about what in it keeps backends from being weighted (run: at start and at each SIGHUP)")
	return f
}

// apply sets cfg's haproxy.config_file when the flag was given.
func (f *haproxyConfigFlag) apply(cfg *config.Config) {
	if f.cmd.Flags().Changed("haproxy-config") {
		cfg.HAProxy.ConfigFile = f.path
	}
}

// printHAProxyWarnings prints, one "file:line: warning: " line each, what HAProxy's
// configuration file says will keep cfg's backends from being weighted, in
// the words run logs them with. A file that cannot be read is an error (after
// the warnings about the others).
func printHAProxyWarnings(w io.Writer, cfg *config.Config) error {
	warnings, err := cfg.HAProxyFileWarnings()
	for _, warning := range warnings {
		fmt.Fprintln(w, warning.String())
	}
	if err != nil {
		return fmt.Errorf("haproxy.config_file: %w", err)
	}
	return nil
}
