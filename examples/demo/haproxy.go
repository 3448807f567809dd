package main

import (
	"context"
	"fmt"
	"os"
	"text/template"

	"github.com/haproxy-weighter/haproxy-weighter/examples/internal/loadlab"
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

// serverStat is what the demo shows of one server from `show stat`.
type serverStat = loadlab.ServerStat

// showStat reads the weight and current connections of every server of the demo backend.
func showStat(ctx context.Context, socket string) (map[string]serverStat, error) {
	return loadlab.ShowStat(ctx, socket, backendName)
}

// parseStat parses `show stat` CSV (header line starts with "# ") for the demo backend.
func parseStat(reply string) (map[string]serverStat, error) {
	return loadlab.ParseStat(reply, backendName)
}
