package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/template"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/haproxy-weighter/haproxy-weighter/examples/internal/loadlab"
	"github.com/haproxy-weighter/haproxy-weighter/internal/freeport"
)

const backend = "be_carbon"

// pinLines are the backend's pin table (docs/pinning.md): entries only the weighter (and
// this bench, for the start's placement) writes.
const pinLines = "stick-table type ip size 100k expire 2h; stick match src"

var haproxyCfg = template.Must(template.New("haproxy.cfg").Parse(`# written by bench-carbon
global
    stats socket {{.Socket}} mode 600 level admin
    maxconn 4096

defaults
    mode tcp
    timeout connect 2s
    timeout client 1h
    timeout server 1h

frontend fe_carbon
    bind {{.Bind}}
    default_backend be_carbon

backend be_carbon
    balance leastconn
    stick-table type ip size 100k expire 2h
    stick match src
{{- range .Servers}}
    server {{.Name}} {{.Addr}}
{{- end}}
`))

// armResult is what one arm measured.
type armResult struct {
	arm     arm
	servers []string    // HAProxy's server names, cache order
	minutes [][]float64 // per minute, each cache's received datapoints/s
	heavy   [][]string  // per minute, the heavy relays' servers at its end
	sent    int64       // datapoints the generators wrote (accepted by the kernel)
	got     float64     // datapoints the caches counted received (metricsReceived)
	opens   []int64     // per relay, connections it opened to HAProxy
	sheds   []string    // from the weighter's log
	pins    []string    // "pins written" lines from the weighter's log
	notes   []string
}

// runArm runs one arm on a fresh carbon, HAProxy and relays, and stops all of it.
func runArm(ctx context.Context, o options, a arm, example []byte, host, dir string) (armResult, error) {
	res := armResult{arm: a}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return res, err
	}
	var children []*loadlab.Child
	var forwarders []*forwarder
	defer func() {
		for i := len(children) - 1; i >= 0; i-- {
			children[i].Stop(10 * time.Second)
		}
		for _, f := range forwarders {
			f.close()
		}
	}()
	start := func(name, bin string, args ...string) (*loadlab.Child, error) {
		c, err := loadlab.StartChild(name, filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".log"), bin, args...)
		if c != nil {
			children = append(children, c)
		}
		return c, err
	}

	// carbon-cache ×4 and graphite-web.
	ports, err := freePorts(3*o.Caches + 1)
	if err != nil {
		return res, err
	}
	var caches []cache
	for i := range o.Caches {
		caches = append(caches, cache{name: string(rune('a' + i)), line: ports[3*i], pickle: ports[3*i+1], cacheQry: ports[3*i+2]})
	}
	if err := writeCacheConf(dir, caches, o.Interval); err != nil {
		return res, err
	}
	for _, c := range caches {
		p, err := start("carbon-cache "+c.name, python, "/usr/bin/carbon-cache", "--config="+filepath.Join(dir, "conf", "carbon.conf"), "--instance="+c.name, "--nodaemon", "start")
		if err != nil {
			return res, err
		}
		if err := waitListening(ctx, p, c.line); err != nil {
			return res, fmt.Errorf("%w\n%s", err, tail(filepath.Join(dir, "carbon-cache-"+c.name+".log")))
		}
	}
	webAddr := ports[3*o.Caches]
	web, err := startGraphiteWeb(ctx, dir, webAddr, caches)
	if web != nil {
		children = append(children, web)
	}
	if err != nil {
		return res, fmt.Errorf("graphite-web: %w\n%s", err, tail(filepath.Join(dir, "graphite-web.log")))
	}

	// HAProxy 2.6 in front of the caches.
	front, err := freeport.Loopback()
	if err != nil {
		return res, err
	}
	socket := filepath.Join(dir, "haproxy.sock")
	type srv struct{ Name, Addr string }
	conf := struct {
		Socket, Bind string
		Servers      []srv
	}{Socket: socket, Bind: front}
	agents := map[string]string{}
	for _, c := range caches {
		name := "cache-" + c.name
		conf.Servers = append(conf.Servers, srv{name, c.line})
		res.servers = append(res.servers, name)
		agents[host+"-"+c.name] = name
	}
	var b strings.Builder
	if err := haproxyCfg.Execute(&b, conf); err != nil {
		return res, err
	}
	hapCfg := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(hapCfg, []byte(b.String()), 0o644); err != nil {
		return res, err
	}
	hap, err := start("haproxy", o.hapBin, "-db", "-f", hapCfg)
	if err != nil {
		return res, err
	}
	if err := hap.WaitReady(ctx, 15*time.Second, func(ctx context.Context) error {
		_, err := loadlab.ShowStat(ctx, socket, backend)
		return err
	}); err != nil {
		return res, fmt.Errorf("%w\n%s", err, tail(filepath.Join(dir, "haproxy.log")))
	}

	// The lottery's outcome: both heavy relays on cache-a (server id 1) when they connect.
	srcs := make([]net.IP, len(o.rates))
	for i := range srcs {
		srcs[i] = net.IPv4(127, 0, 0, byte(11+i))
	}
	for _, ip := range srcs[:2] {
		if _, err := runtime(ctx, socket, fmt.Sprintf("set table %s key %s data.server_id 1", backend, ip)); err != nil {
			return res, err
		}
	}

	// The relays, each behind its forwarder, and their load.
	var gens []*generator
	for i, rate := range o.rates {
		f, err := startForwarder(srcs[i], front)
		if err != nil {
			return res, err
		}
		forwarders = append(forwarders, f)
		rp, err := freePorts(2)
		if err != nil {
			return res, err
		}
		rdir := filepath.Join(dir, fmt.Sprintf("relay-%d", i+1))
		if err := writeRelayConf(rdir, rp[0], rp[1], f.addr()); err != nil {
			return res, err
		}
		p, err := start(fmt.Sprintf("carbon-relay %d", i+1), python, "/usr/bin/carbon-relay", "--config="+filepath.Join(rdir, "conf", "carbon.conf"), "--nodaemon", "start")
		if err != nil {
			return res, err
		}
		if err := waitListening(ctx, p, rp[0]); err != nil {
			return res, fmt.Errorf("%w\n%s", err, tail(filepath.Join(dir, fmt.Sprintf("carbon-relay-%d.log", i+1))))
		}
		gens = append(gens, &generator{relay: i + 1, rate: rate, addr: rp[0]})
	}
	tctx, stopTraffic := context.WithCancel(ctx)
	defer stopTraffic()
	var wg sync.WaitGroup
	t0 := time.Now()
	for _, g := range gens {
		wg.Add(1)
		go func() { defer wg.Done(); g.run(tctx) }()
	}
	// Once both heavy relays are on cache-a, the hand-made entries go: the arm balances
	// from there (its daemon's pins, if it pins, are its own).
	if err := waitFor(ctx, 30*time.Second, func() error {
		where, err := relayServers(ctx, socket, srcs[:2])
		if err == nil && (where[0] != "cache-a" || where[1] != "cache-a") {
			err = fmt.Errorf("heavy relays on %v", where)
		}
		return err
	}); err != nil {
		return res, fmt.Errorf("the heavy relays did not connect to cache-a: %w", err)
	}
	for _, ip := range srcs[:2] {
		if _, err := runtime(ctx, socket, fmt.Sprintf("clear table %s key %s", backend, ip)); err != nil {
			return res, err
		}
	}

	// The daemon.
	var logPath string
	if a.Daemon {
		listen, err := freeport.Loopback()
		if err != nil {
			return res, err
		}
		cfg, err := daemonConfig(example, o, a, socket, "http://"+webAddr, listen, agents)
		if err != nil {
			return res, err
		}
		path := filepath.Join(dir, "weighter.yaml")
		if err := os.WriteFile(path, cfg, 0o644); err != nil {
			return res, err
		}
		args := []string{"run", "--config", path}
		if a.Pin {
			args = append(args, "--haproxy-config", hapCfg)
		}
		logPath = filepath.Join(dir, "haproxy-weighter.log")
		d, err := start("haproxy-weighter", o.Weighter, args...)
		if err != nil {
			return res, err
		}
		if err := d.WaitReady(ctx, 15*time.Second, loadlab.HTTPOK("http://"+listen+"/healthz")); err != nil {
			return res, fmt.Errorf("%w\n%s", err, tail(logPath))
		}
	}

	// Each minute: where the heavy relays are.
	for m := 1; time.Since(t0) < o.Duration; m++ {
		if !loadlab.SleepCtx(ctx, time.Until(t0.Add(time.Duration(m)*time.Minute))) {
			return res, ctx.Err()
		}
		where, err := relayServers(ctx, socket, srcs[:2])
		if err != nil {
			where = []string{"?", "?"}
		}
		res.heavy = append(res.heavy, where)
		for _, c := range children {
			if ok, err := c.Exited(); ok {
				return res, fmt.Errorf("%s exited: %v", c.Name, err)
			}
		}
	}
	end := time.Now()
	stopTraffic()
	wg.Wait()
	for _, g := range gens {
		res.sent += g.sent.Load()
	}
	for _, f := range forwarders {
		res.opens = append(res.opens, f.opens.Load())
	}
	// The relays pass on what they hold; then every cache counts its last interval.
	loadlab.SleepCtx(ctx, 5*time.Second+o.Interval+2*time.Second)
	// Every count since before the traffic started (whisper stamps a count with the start
	// of its step, so the first one of the traffic can be stamped before t0; the counts
	// before the traffic are 0).
	counts, err := renderCounts(ctx, "http://"+webAddr, t0.Add(-2*o.Interval), time.Now().Add(o.Interval))
	if err != nil {
		return res, err
	}
	res.minutes = perMinute(counts, agents, res.servers, t0, end, o.Interval)
	for _, ps := range counts {
		for _, p := range ps {
			res.got += p.Count
		}
	}
	if logPath != "" {
		res.sheds, res.pins = fromLog(logPath, t0)
	}
	return res, nil
}

// perMinute is each cache's received datapoints/s per whole minute from t0 until end:
// the counts stamped in (t0+m-1 min − step, t0+m min − step], over 60 s (whisper stamps
// the count of the interval that ended at T with the start of its step, up to one step,
// carbon's metric interval, before T).
func perMinute(counts map[string][]point, agents map[string]string, servers []string, t0, end time.Time, step time.Duration) [][]float64 {
	var out [][]float64
	for m := 1; !t0.Add(time.Duration(m) * time.Minute).After(end.Add(time.Second)); m++ {
		from, to := t0.Add(time.Duration(m-1)*time.Minute-step), t0.Add(time.Duration(m)*time.Minute-step)
		row := make([]float64, len(servers))
		for agent, ps := range counts {
			i := slices.Index(servers, agents[agent])
			if i < 0 {
				continue
			}
			for _, p := range ps {
				if p.T.After(from) && !p.T.After(to) {
					row[i] += p.Count / 60
				}
			}
		}
		out = append(out, row)
	}
	return out
}

// daemonConfig is the example config with this arm's socket, Graphite, caches (carbon's
// agents mapped to HAProxy's servers), listen address, scale(…, 1/interval), and the
// arm's shed and pin settings.
func daemonConfig(example []byte, o options, a arm, socket, graphiteURL, listen string, agents map[string]string) ([]byte, error) {
	var cfg map[string]any
	if err := yaml.Unmarshal(example, &cfg); err != nil {
		return nil, fmt.Errorf("%s: %w", o.Example, err)
	}
	cfg["listen"] = listen
	cfg["haproxy"] = map[string]any{"socket": socket}
	bs, ok := cfg["backends"].([]any)
	if !ok || len(bs) != 1 {
		return nil, fmt.Errorf("%s: want one backend", o.Example)
	}
	b, _ := bs[0].(map[string]any)
	if b == nil || b["name"] != backend {
		return nil, fmt.Errorf("%s: want backend %s", o.Example, backend)
	}
	src, _ := b["source"].(map[string]any)
	gr, _ := src["graphite"].(map[string]any)
	target, _ := gr["target"].(string)
	if gr == nil || !strings.Contains(target, "0.0166667") {
		return nil, fmt.Errorf("%s: want a graphite target of carbon's counts scaled by 1/60 s, got %q", o.Example, target)
	}
	gr["url"] = graphiteURL
	gr["target"] = strings.Replace(target, "0.0166667", scaleOf(o.Interval), 1)
	gr["server_map"] = agents
	// The example sheds and pins (its relays reconnect): the arms without
	// take them out.
	delete(b, "shed")
	if a.Shed {
		b["shed"] = map[string]any{"above": 1.5}
	}
	if !a.Pin {
		b["pin"] = false
	}
	return yaml.Marshal(cfg)
}

// relayServers is the server each of srcs' connections is on, from `show sess`.
func relayServers(ctx context.Context, socket string, srcs []net.IP) ([]string, error) {
	reply, err := runtime(ctx, socket, "show sess")
	if err != nil {
		return nil, err
	}
	out := make([]string, len(srcs))
	for i := range out {
		out[i] = "-"
	}
	for _, l := range strings.Split(reply, "\n") {
		var src, srv string
		for _, f := range strings.Fields(l) {
			if v, ok := strings.CutPrefix(f, "src="); ok {
				src, _, _ = strings.Cut(v, ":")
			} else if v, ok := strings.CutPrefix(f, "srv="); ok {
				srv = v
			}
		}
		for i, ip := range srcs {
			if src == ip.String() && srv != "" && srv != "<none>" {
				out[i] = srv
			}
		}
	}
	return out, nil
}

func runtime(ctx context.Context, socket, cmd string) (string, error) {
	reply, err := loadlab.RuntimeCommand(ctx, socket, cmd)
	if err != nil {
		return "", err
	}
	if t := strings.TrimSpace(reply); strings.HasPrefix(cmd, "set ") || strings.HasPrefix(cmd, "clear ") {
		if t != "" {
			return "", fmt.Errorf("%s: %s", cmd, t)
		}
	}
	return reply, nil
}

func waitFor(ctx context.Context, timeout time.Duration, check func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		if !loadlab.SleepCtx(ctx, 200*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// fromLog lists the weighter's sheds ("session shed": when, server, client, rate) and
// pin writes ("pins written": when, set, cleared).
func fromLog(path string, t0 time.Time) (sheds, pins []string) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil
	}
	for _, l := range strings.Split(string(b), "\n") {
		kv := loadlab.LogFields(l)
		at, err := time.Parse(time.RFC3339Nano, kv["time"])
		if err != nil {
			continue
		}
		s := at.Sub(t0).Seconds()
		switch kv["msg"] {
		case "session shed":
			client, _, _ := strings.Cut(kv["client"], ":")
			rate, _ := strconv.ParseFloat(kv["rate_bytes_per_second"], 64)
			sheds = append(sheds, fmt.Sprintf("%.0fs %s %s %.0f B/s", s, kv["server"], client, rate))
		case "pins written":
			pins = append(pins, fmt.Sprintf("%.0fs +%s-%s", s, kv["set"], kv["cleared"]))
		case "clients not pinned", "clients not measured", "pin table full", "pin table not read":
			pins = append(pins, fmt.Sprintf("%.0fs %s (%s)", s, kv["msg"], kv["reason"]))
		}
	}
	return sheds, pins
}

func maxOverMean(loads []float64) float64 { return loadlab.MaxOverMean(loads) }

// writeArm prints one arm's minutes.
func writeArm(w io.Writer, o options, r armResult) {
	fmt.Fprintf(w, "arm %s: %s\n", r.arm.Name, r.arm.Says)
	fmt.Fprintf(w, "%-7s", "minute")
	for _, s := range r.servers {
		fmt.Fprintf(w, " %9s", s)
	}
	fmt.Fprintf(w, " %9s  %s\n", "max/mean", "heavy relays on")
	for m, row := range r.minutes {
		fmt.Fprintf(w, "%-7d", m+1)
		for _, v := range row {
			fmt.Fprintf(w, " %9.0f", v)
		}
		heavy := "-"
		if m < len(r.heavy) {
			heavy = strings.Join(r.heavy[m], ", ")
		}
		fmt.Fprintf(w, " %9.2f  %s\n", maxOverMean(row), heavy)
	}
	fmt.Fprintf(w, "datapoints sent %d, received by the caches %.0f, lost %.0f (%.4f %%); connections each relay opened: %v\n",
		r.sent, r.got, float64(r.sent)-r.got, 100*(float64(r.sent)-r.got)/math.Max(1, float64(r.sent)), r.opens)
	if r.arm.Daemon {
		fmt.Fprintf(w, "sheds: %d", len(r.sheds))
		if len(r.sheds) > 0 {
			fmt.Fprintf(w, " (%s)", strings.Join(r.sheds, "; "))
		}
		fmt.Fprintln(w)
		if len(r.pins) > 0 {
			fmt.Fprintf(w, "pins: %s\n", strings.Join(r.pins, "; "))
		}
	}
	fmt.Fprintln(w)
}

// writeSummary prints max/mean per minute for every arm side by side.
func writeSummary(w io.Writer, o options, rs []armResult) {
	fmt.Fprintf(w, "max/mean of the caches' received datapoints/s per minute (carbon's metricsReceived)\n%-10s", "arm")
	most := 0
	for _, r := range rs {
		most = max(most, len(r.minutes))
	}
	for m := range most {
		fmt.Fprintf(w, " %6s", fmt.Sprintf("m%d", m+1))
	}
	fmt.Fprintf(w, "  %-22s %s\n", "first minute <= 2.0", "lost")
	for _, r := range rs {
		fmt.Fprintf(w, "%-10s", r.arm.Name)
		first := "never"
		for m, row := range r.minutes {
			v := maxOverMean(row)
			fmt.Fprintf(w, " %6.2f", v)
			if first == "never" && v <= 2.0 && !math.IsNaN(v) {
				first = strconv.Itoa(m + 1)
			}
		}
		for range most - len(r.minutes) {
			fmt.Fprintf(w, " %6s", "")
		}
		fmt.Fprintf(w, "  %-22s %.0f of %d\n", first, float64(r.sent)-r.got, r.sent)
	}
}

func findHAProxy(flagValue string) (string, error) { return loadlab.FindHAProxy(flagValue) }

// firstLine runs bin with args and returns the first line of its output.
func firstLine(bin string, args ...string) string {
	out, _ := exec.Command(bin, args...).CombinedOutput()
	l, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	if l == "" {
		return filepath.Base(bin)
	}
	return l
}

func graphiteVersion(ctx context.Context) string {
	out, err := exec.CommandContext(ctx, "dpkg-query", "-W", "-f", "${Package} ${Version}, ", "graphite-carbon", "graphite-web").Output()
	if err != nil {
		return "graphite-carbon"
	}
	return strings.TrimSuffix(strings.TrimSpace(string(out)), ",")
}

// tail is the last lines of a log, for an error.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-10):], "\n")
}
