package cmd

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/haproxy-weighter/haproxy-weighter/config"
	"github.com/haproxy-weighter/haproxy-weighter/internal/errs"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// configFlags are the flags of run and once: a file, or one backend by flags.
type configFlags struct {
	path           string
	f              config.Flags
	limitingFactor float64
	aggressiveness float64
	listen         string
	cmd            *cobra.Command
}

func addConfigFlags(c *cobra.Command, withListen bool) *configFlags {
	cf := &configFlags{cmd: c}
	p := weighter.DefaultPolicy()
	fs := c.Flags()
	fs.StringVarP(&cf.path, "config", "c", "", "configuration file (YAML); without it, the flags below describe one backend")
	fs.StringVar(&cf.f.Socket, "socket", config.DefaultSocket, "HAProxy admin socket: unix path or host:port")
	fs.StringVar(&cf.f.Backend, "backend", "", "HAProxy backend to weight")
	fs.StringVar(&cf.f.PrometheusURL, "prometheus-url", "", "Prometheus base URL (load source)")
	fs.StringVar(&cf.f.Query, "query", "", "PromQL query returning one series per server")
	fs.StringVar(&cf.f.ServerLabel, "server-label", "", "label naming the server in the query result (default server)")
	fs.StringVar(&cf.f.GraphiteURL, "graphite-url", "", "Graphite base URL (load source)")
	fs.StringVar(&cf.f.Target, "target", "", "Graphite render target returning one series per server")
	fs.StringVar(&cf.f.HAProxyCounter, "haproxy-counter", "", "use HAProxy's own statistics as load: bytes_in, bytes_out, sessions_total, current_sessions")
	fs.BoolVar(&cf.f.PerConnection, "per-connection", false, "with --haproxy-counter (a rate): divide each server's rate by its open sessions")
	fs.StringVar(&cf.f.Function, "function", "", "weighting function: "+strings.Join(weighter.FunctionNames(), ", ")+" (default "+p.Function+")")
	fs.Float64Var(&cf.limitingFactor, "limiting-factor", p.LimitingFactor, "no server counts as lighter than mean/limiting-factor")
	fs.Float64Var(&cf.aggressiveness, "aggressiveness", p.Aggressiveness, "exponent of the load ratio")
	intervalHelp := "bound on the one cycle (its timeout, when timeout is not set)"
	if withListen { // run: the daemon's interval
		intervalHelp = "time between two cycles of a backend"
	}
	fs.DurationVar(&cf.f.Interval, "interval", config.DefaultInterval, intervalHelp)
	if withListen {
		fs.StringVar(&cf.listen, "listen", config.DefaultListen, "address of /metrics, /healthz, /readyz (empty disables)")
	}
	return cf
}

// load returns the configuration from --config or from the backend flags.
// With --config, only --interval and --listen may be given as well (they override the file).
func (cf *configFlags) load() (*config.Config, error) {
	fs := cf.cmd.Flags()
	if fs.Changed("limiting-factor") {
		cf.f.LimitingFactor = &cf.limitingFactor
	}
	if fs.Changed("aggressiveness") {
		cf.f.Aggressiveness = &cf.aggressiveness
	}
	if fs.Changed("listen") {
		cf.f.Listen = &cf.listen
	}
	if !fs.Changed("interval") {
		cf.f.Interval = 0
	} else if cf.f.Interval <= 0 { // FromFlags takes 0 as "not given"
		return nil, usageError{fmt.Errorf("--interval: must be positive, got %s", cf.f.Interval)}
	}
	if cf.path == "" {
		if cf.f.Backend == "" {
			return nil, usageError{errors.New("give --config FILE, or --backend and a source (--prometheus-url, --graphite-url or --haproxy-counter)")}
		}
		if !fs.Changed("socket") {
			cf.f.Socket = ""
		}
		// Every value comes from the command line: a bad one is a usage
		// error (exit 2), and FromFlags words it by flag.
		cfg, err := config.FromFlags(cf.f)
		if err != nil {
			return nil, usageError{err}
		}
		return cfg, nil
	}
	if anyChanged(fs.Changed, "socket", "backend", "prometheus-url", "query", "server-label",
		"graphite-url", "target", "haproxy-counter", "per-connection", "function", "limiting-factor", "aggressiveness") {
		return nil, usageError{errors.New("--config and backend flags (--backend, --socket, --query, ...) cannot be mixed")}
	}
	cfg, err := config.Load(cf.path)
	if err != nil {
		return nil, err
	}
	if fs.Changed("interval") {
		cfg.Interval = cf.f.Interval
	}
	if cf.f.Listen != nil {
		cfg.Listen = *cf.f.Listen
	}
	// Load has validated the file: what fails now is --interval or --listen.
	if err := cfg.Validate(); err != nil {
		return nil, usageError{config.FlagsError(err)}
	}
	return cfg, nil
}

func anyChanged(changed func(string) bool, names ...string) bool {
	for _, n := range names {
		if changed(n) {
			return true
		}
	}
	return false
}

// policyFlagsError rewrites the problems of a policy made from the command's
// flags (calc, simulate) in terms of the flags, as a usage error (exit 2):
// "max_step must be > 1" becomes "--max-step must be > 1". A problem whose
// key has no flag keeps its wording.
func policyFlagsError(fs *pflag.FlagSet, err error) error {
	var out []error
	for _, leaf := range errs.Leaves(err) {
		msg := leaf.Error()
		key, rest, _ := strings.Cut(msg, " ")
		if flag := strings.ReplaceAll(key, "_", "-"); fs.Lookup(flag) != nil {
			msg = "--" + flag + " " + rest
		}
		out = append(out, errors.New(msg))
	}
	return usageError{errors.Join(out...)}
}
