package cmd

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/haproxy-weighter/haproxy-weighter/cmd/internal/cli"
	"github.com/haproxy-weighter/haproxy-weighter/config"
	"github.com/haproxy-weighter/haproxy-weighter/internal/duration"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// configFlags are the flags of run and once: a file, or one backend by flags.
type configFlags struct {
	path           string
	f              config.Flags
	limitingFactor float64
	aggressiveness float64
	listen         string
	// source holds the source flags (config.SourceFlags), by name.
	source map[string]*string
	cmd    *cobra.Command
	// haproxyConfig is --haproxy-config (haproxyconfig.go).
	haproxyConfig *haproxyConfigFlag
}

func addConfigFlags(c *cobra.Command, withListen bool) *configFlags {
	cf := &configFlags{cmd: c, source: map[string]*string{}}
	p := weighter.DefaultPolicy()
	fs := c.Flags()
	fs.StringVarP(&cf.path, "config", "c", "", "configuration file (YAML); without it, the flags below describe one backend")
	fs.StringVar(&cf.f.Socket, "socket", config.DefaultSocket, "HAProxy admin socket: unix path or host:port")
	fs.BoolVar(&cf.f.Master, "master", false, "--socket is HAProxy's master CLI (haproxy -W -S): commands go to the current worker (@1), also after a reload")
	fs.StringVar(&cf.f.Match, "match", "", "name (default) or address: the source's series name servers by address (server-template, service discovery)")
	fs.StringVar(&cf.f.Backend, "backend", "", "HAProxy backend to weight")
	for _, f := range config.SourceFlags() {
		v := new(string)
		if f.Bool {
			fs.Var(boolString{v}, f.Name, f.Usage)
			fs.Lookup(f.Name).NoOptDefVal = "true"
		} else {
			fs.StringVar(v, f.Name, "", f.Usage)
		}
		cf.source[f.Name] = v
	}
	fs.StringVar(&cf.f.Function, "function", "", "weighting function: "+strings.Join(weighter.FunctionNames(), ", ")+" (default "+p.Function+")")
	fs.Float64Var(&cf.limitingFactor, "limiting-factor", p.LimitingFactor, "no server counts as lighter than mean/limiting-factor")
	fs.Float64Var(&cf.aggressiveness, "aggressiveness", p.Aggressiveness, "exponent of the load ratio")
	intervalHelp := fmt.Sprintf("bound on the one cycle (its timeout, when timeout is not set); default: the interval run would use (%s with the fast signal, else %s)",
		config.DefaultFastInterval, config.DefaultInterval)
	if withListen { // run: the daemon's interval
		intervalHelp = fmt.Sprintf("time between two cycles of a backend (default %s with the fast signal, else %s)",
			config.DefaultFastInterval, config.DefaultInterval)
	}
	// No flag default: left unset, the configuration picks the interval by
	// whether the backend uses the fast signal.
	fs.DurationVar(&cf.f.Interval, "interval", 0, intervalHelp)
	fs.StringVar(&cf.f.FastSignal, "fast-signal", "", fmt.Sprintf("%s or %s: weigh an HAProxy backend by HAProxy's live per-connection bytes, calibrated by the source (default %s); %s, %s or %s: on, read by that reader alone",
		config.FastOn, config.FastOff, config.FastOn, config.FastKernel, config.FastSessions, config.FastStat))
	if withListen {
		fs.StringVar(&cf.listen, "listen", config.DefaultListen, "address of /metrics, /healthz, /readyz (empty disables)")
	}
	cf.haproxyConfig = addHAProxyConfigFlag(c)
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
	cf.f.Source = map[string]string{}
	for name, v := range cf.source {
		cf.f.Source[name] = *v
	}
	if !fs.Changed("interval") {
		cf.f.Interval = 0
	} else if cf.f.Interval <= 0 { // FromFlags takes 0 as "not given"
		return nil, cli.Usage(fmt.Errorf("--interval: must be positive, got %s", cf.f.Interval))
	}
	if cf.path == "" {
		if cf.f.Backend == "" {
			return nil, cli.Usage(fmt.Errorf("give --config FILE, or --backend and a source (%s)", config.SourceChoice()))
		}
		if !fs.Changed("socket") {
			cf.f.Socket = ""
		}
		// Every value comes from the command line: a bad one is a usage
		// error (exit 2), and FromFlags words it by flag.
		cfg, err := config.FromFlags(cf.f)
		if err != nil {
			return nil, cli.Usage(err)
		}
		cf.haproxyConfig.apply(cfg)
		return cfg, nil
	}
	backendFlags := []string{"socket", "master", "match", "backend", "function", "limiting-factor", "aggressiveness", "fast-signal"}
	for name := range cf.source {
		backendFlags = append(backendFlags, name)
	}
	if anyChanged(fs.Changed, backendFlags...) {
		return nil, cli.Usage(errors.New("--config and backend flags (--backend, --socket, --query, ...) cannot be mixed"))
	}
	cfg, err := config.Load(cf.path)
	if err != nil {
		return nil, err
	}
	if fs.Changed("interval") {
		cfg.Interval = duration.Duration(cf.f.Interval)
	}
	if cf.f.Listen != nil {
		cfg.Listen = *cf.f.Listen
	}
	// Load has validated the file: what fails now is --interval or --listen.
	if err := cfg.Validate(); err != nil {
		return nil, cli.Usage(config.FlagsError(err))
	}
	cf.haproxyConfig.apply(cfg)
	return cfg, nil
}

// boolString is a flag without a value ("--per-connection") kept as "true"
// or "", as the source kinds' flags are given to config.FromFlags.
type boolString struct{ v *string }

func (b boolString) String() string {
	if b.v == nil || *b.v == "" {
		return "false"
	}
	return *b.v
}

func (b boolString) Set(s string) error {
	on, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	*b.v = ""
	if on {
		*b.v = "true"
	}
	return nil
}

func (b boolString) Type() string { return "bool" }

func anyChanged(changed func(string) bool, names ...string) bool {
	for _, n := range names {
		if changed(n) {
			return true
		}
	}
	return false
}

// policyFlagsError rewrites the problems of a policy made from calc's flags
// in terms of the flags (cli.PolicyError), as a usage error (exit 2).
func policyFlagsError(fs *pflag.FlagSet, err error) error {
	return cli.Usage(cli.PolicyError(fs, err))
}
