package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/template"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/examples/internal/loadlab"
	"github.com/haproxy-weighter/haproxy-weighter/internal/freeport"
)

// haproxyCfg is HAProxy as a user has it in front of long-lived clients: leastconn, an
// admin socket, no weights set and no `option contstats` (so a server's bytes_in moves
// only when a connection ends). With Placed, each frontend port is one server: the
// oracle's placement picks the server by the port it connects to.
var haproxyCfg = template.Must(template.New("haproxy.cfg").Parse(`# written by bench-balance
global
    stats socket {{.Socket}} mode 600 level admin
    maxconn {{.Maxconn}}

defaults
    mode tcp
    timeout connect 2s
    timeout client {{.Timeout}}
    timeout server {{.Timeout}}

frontend fe_ingest
{{- range .Binds}}
    bind {{.}}
{{- end}}
    default_backend {{.Backend}}

backend {{.Backend}}
    balance leastconn
{{- if .Pin}}
    stick-table type ip size 100k expire 2h
    stick match src
{{- end}}
{{- if .Placed}}
{{- range $i, $s := .Servers}}
    use-server {{$s.Name}} if { dst_port {{index $.Ports $i}} }
{{- end}}
{{- end}}
{{- range .Servers}}
    server {{.Name}} {{.Addr}}
{{- end}}
`))

type haproxyServer struct{ Name, Addr string }

// pinTableLines are what a pin arm's backend has beyond the others' (docs/pinning.md):
// a stick table keyed by client address whose entries only the weighter writes
// (`stick match`, not `stick on`: HAProxy itself creates none). Printed in the header.
const pinTableLines = "stick-table type ip size 100k expire 2h; stick match src"

type haproxyConf struct {
	Socket  string
	Backend string
	// Timeout is the client and server inactivity timeout: 5m in the lab (longer than
	// any pause of its clients), 1h in production, where users of hour-long connections set
	// it so (a tcp-mode stream whose server never answers must not be cut by it).
	Timeout string
	Maxconn int // global maxconn (haproxyMaxconn): every caller sets it
	Binds   []string
	Placed  bool
	Pin     bool     // the backend has the pin table's two lines (pinTableLines)
	Ports   []string // with Placed: the port of each server's bind
	Servers []haproxyServer
}

// startHAProxy writes name.cfg into dir and starts HAProxy on it (conf gives its socket,
// backend, timeout and whether it is placed), in front of sinks, with one frontend address
// (or, placed, one per server), and waits until its socket shows every server. The child
// is returned even with an error, so that it can be stopped.
func startHAProxy(ctx context.Context, conf haproxyConf, hap, dir, name string, sinks []*loadlab.Sink) (*loadlab.Child, []string, error) {
	backend := conf.Backend
	if conf.Timeout == "" {
		conf.Timeout = "5m"
	}
	nBinds := 1
	if conf.Placed {
		nBinds = len(sinks)
	}
	for range nBinds {
		a, err := freeport.Loopback()
		if err != nil {
			return nil, nil, err
		}
		conf.Binds = append(conf.Binds, a)
		conf.Ports = append(conf.Ports, a[strings.LastIndexByte(a, ':')+1:])
	}
	for _, s := range sinks {
		conf.Servers = append(conf.Servers, haproxyServer{Name: s.Name, Addr: s.Addr()})
	}
	var b strings.Builder
	if err := haproxyCfg.Execute(&b, conf); err != nil {
		return nil, nil, fmt.Errorf("haproxy config: %w", err)
	}
	cfg := filepath.Join(dir, name+".cfg")
	if err := os.WriteFile(cfg, []byte(b.String()), 0o644); err != nil {
		return nil, nil, fmt.Errorf("write haproxy config: %w", err)
	}
	h, err := runHAProxy(ctx, hap, cfg, filepath.Join(dir, name+".log"), name, conf.Socket, backend, len(sinks))
	return h, conf.Binds, err
}

// runHAProxy starts HAProxy on the config file cfg, logging to logPath, and waits until
// its socket shows the backend's servers (a start, or -scenario restart's start again on
// the same file). The child is returned even with an error, so that it can be stopped.
func runHAProxy(ctx context.Context, hap, cfg, logPath, name, socket, backend string, servers int) (*loadlab.Child, error) {
	h, err := loadlab.StartChild(name, logPath, hap, "-db", "-f", cfg)
	if err != nil {
		return nil, err
	}
	ready := func(ctx context.Context) error {
		st, err := loadlab.ShowStat(ctx, socket, backend)
		if err == nil && len(st) != servers {
			err = fmt.Errorf("%d of %d servers in show stat", len(st), servers)
		}
		return err
	}
	if err := h.WaitReady(ctx, 15*time.Second, ready); err != nil {
		return h, fmt.Errorf("%w\n%s", err, tail(logPath))
	}
	return h, nil
}
