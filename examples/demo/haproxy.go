package main

import (
	"bufio"
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"text/template"
	"time"
)

const backendName = "be_sinks"

var haproxyCfg = template.Must(template.New("haproxy.cfg").Parse(`# written by the haproxy-weighter demo
global
    stats socket {{.Socket}} mode 600 level admin
    maxconn 4096

defaults
    mode tcp
    # Without contstats HAProxy adds a connection's bytes to the server's bytes_in only
    # when the connection closes (or rarely before): with long-lived connections the
    # counter moves in huge bursts and a bytes_in rate says little about current load.
    # contstats updates the counters along the way (every few seconds per connection).
    option contstats
    timeout connect 2s
    timeout client 5m
    timeout server 5m

frontend fe_demo
    bind {{.Frontend}}
    default_backend ` + backendName + `

# leastconn + runtime weights: a new connection goes to the server with the lowest
# (active+1)/weight, so the weighter steers new connections away from busy servers.
backend ` + backendName + `
    balance leastconn
{{- range .Servers}}
    server {{.Name}} {{.Addr}} weight {{$.Weight}}
{{- end}}
`))

type haproxyServer struct{ Name, Addr string }

// haproxyConf is what the demo's haproxy.cfg needs.
type haproxyConf struct {
	Socket   string
	Frontend string
	Weight   int
	Servers  []haproxyServer
}

// writeHAProxyConfig writes an HAProxy configuration to path and returns the path.
func writeHAProxyConfig(path string, c haproxyConf) (string, error) {
	f, err := os.Create(path)
	if err != nil {
		return "", fmt.Errorf("create haproxy config: %w", err)
	}
	defer f.Close()
	if err := haproxyCfg.Execute(f, c); err != nil {
		return "", fmt.Errorf("write haproxy config: %w", err)
	}
	return path, f.Close()
}

// runtimeCommand sends one command to HAProxy's runtime socket and returns the reply.
func runtimeCommand(ctx context.Context, socket, cmd string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		return "", fmt.Errorf("dial haproxy socket: %w", err)
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	if _, err := io.WriteString(c, cmd+"\n"); err != nil {
		return "", fmt.Errorf("send %q: %w", cmd, err)
	}
	b, err := io.ReadAll(bufio.NewReader(c))
	if err != nil {
		return "", fmt.Errorf("read reply to %q: %w", cmd, err)
	}
	return string(b), nil
}

// serverStat is what the demo shows of one server from `show stat`.
type serverStat struct {
	Weight int
	Conns  int
}

// showStat reads the weight and current connections of every server of the demo backend.
func showStat(ctx context.Context, socket string) (map[string]serverStat, error) {
	reply, err := runtimeCommand(ctx, socket, "show stat")
	if err != nil {
		return nil, err
	}
	return parseStat(reply)
}

// parseStat parses `show stat` CSV (header line starts with "# ").
func parseStat(reply string) (map[string]serverStat, error) {
	r := csv.NewReader(strings.NewReader(strings.TrimPrefix(reply, "# ")))
	r.FieldsPerRecord = -1
	rows, err := r.ReadAll()
	if err != nil || len(rows) < 1 {
		return nil, fmt.Errorf("parse show stat: %w (%d rows)", err, len(rows))
	}
	col := map[string]int{}
	for i, h := range rows[0] {
		col[h] = i
	}
	for _, k := range []string{"pxname", "svname", "weight", "scur"} {
		if _, ok := col[k]; !ok {
			return nil, fmt.Errorf("parse show stat: no column %q", k)
		}
	}
	out := map[string]serverStat{}
	for _, row := range rows[1:] {
		if len(row) < len(rows[0]) || row[col["pxname"]] != backendName {
			continue
		}
		name := row[col["svname"]]
		if name == "BACKEND" || name == "FRONTEND" {
			continue
		}
		w, _ := strconv.Atoi(row[col["weight"]])
		n, _ := strconv.Atoi(row[col["scur"]])
		out[name] = serverStat{Weight: w, Conns: n}
	}
	return out, nil
}
