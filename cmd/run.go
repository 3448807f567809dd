package cmd

import (
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/haproxy-weighter/haproxy-weighter/cmd/internal/cli"
	"github.com/haproxy-weighter/haproxy-weighter/config"
	"github.com/haproxy-weighter/haproxy-weighter/daemon"
)

func newRunCmd(logging *cli.Logging) *cobra.Command {
	c := &cobra.Command{
		Use:   "run",
		Short: "Run the daemon: weight every configured backend every interval",
		Example: "  haproxy-weighter run --config /etc/haproxy-weighter/config.yaml\n" +
			"  haproxy-weighter run --socket /run/haproxy/admin.sock --backend be_ingest --prometheus-url http://127.0.0.1:9090 \\\n" +
			"    --query 'rate(datapoints_received_total[1m])' --server-label server\n" +
			"  haproxy-weighter run --config /etc/haproxy-weighter/config.yaml --dry-run   # shadow mode: plans, writes nothing",
		Args: cli.Args(cobra.NoArgs),
	}
	cf := addConfigFlags(c, true)
	var dryRun bool
	c.Flags().BoolVar(&dryRun, "dry-run", false,
		"cycle, plan, log and export every backend as usual, and write nothing (as dry_run: true on each backend); /readyz as in a live run")
	var webConfig string
	c.Flags().StringVar(&webConfig, "web.config.file", "",
		"exporter-toolkit web configuration file: TLS and basic auth of /metrics, /healthz, /readyz (as web_config_file, which it overrides)")
	load := func() (*config.Config, error) {
		cfg, err := cf.load()
		if err == nil && webConfig != "" {
			cfg.WebConfigFile = webConfig
		}
		if err == nil && dryRun {
			for i := range cfg.Backends {
				cfg.Backends[i].DryRun = true
			}
		}
		return cfg, err
	}
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		setRunGC()
		log, err := logging.Logger(cmd.ErrOrStderr())
		if err != nil {
			return err
		}
		cfg, err := load()
		if err != nil {
			return err
		}
		logWarnings(log, cfg)
		// A reload keeps --dry-run: the flag holds for the process.
		reload := func() (*config.Config, error) {
			cfg, err := load()
			if err == nil {
				logWarnings(log, cfg)
			}
			return cfg, err
		}
		ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
		defer stop()
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
		d := daemon.New(cfg, daemon.Options{Log: log, Reload: reload})
		return d.Run(ctx, hup)
	}
	return c
}
