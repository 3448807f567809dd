package cmd

import (
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/haproxy-weighter/haproxy-weighter/config"
	"github.com/haproxy-weighter/haproxy-weighter/daemon"
)

func init() {
	c := &cobra.Command{
		Use:   "run",
		Short: "Run the daemon: weight every configured backend every interval",
		Example: "  haproxy-weighter run --config /etc/haproxy-weighter/config.yaml\n" +
			"  haproxy-weighter run --socket /run/haproxy/admin.sock --backend be_ingest --prometheus-url http://127.0.0.1:9090 \\\n" +
			"    --query 'rate(datapoints_received_total[1m])' --server-label server",
		Args: usageArgs(cobra.NoArgs),
	}
	cf := addConfigFlags(c, true)
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		log, err := newLogger(cmd.ErrOrStderr())
		if err != nil {
			return err
		}
		cfg, err := cf.load()
		if err != nil {
			return err
		}
		reload := func() (*config.Config, error) { return cf.load() }
		ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
		defer stop()
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
		d := daemon.New(cfg, daemon.Options{Log: log, Reload: reload})
		return d.Run(ctx, hup)
	}
	rootCmd.AddCommand(c)
}
