package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// weighterConf is the part of haproxy-weighter's configuration the demo sets.
type weighterConf struct {
	Interval time.Duration
	Window   time.Duration // rate_window of the HAProxy stats source
	Listen   string
	Socket   string
	Function string
	Extra    string // more backend keys (policy), YAML, one "key: value" per line
	PerConn  bool   // weight by load per connection (see haproxy.StatsConfig)
}

// writeWeighterConfig writes the daemon's YAML config into dir: one backend, weighted
// from HAProxy's own bytes, so no monitoring stack is needed. With the fast signal on
// (the default) the daemon reads each open connection's live byte totals; rate_window
// serves the `show stat` fallback, whose counters advance in ~5 s steps with
// contstats (a rate over one 5 s interval made the busiest server look idle).
func writeWeighterConfig(dir string, c weighterConf) (string, error) {
	text := fmt.Sprintf(`# written by the haproxy-weighter demo
interval: %s
listen: %s
haproxy:
  socket: %s
backends:
  - name: %s
    source:
      haproxy: {counter: bytes_in, rate_window: %s, per_connection: %t}
    function: %s
%s`, c.Interval, c.Listen, c.Socket, backendName, c.Window, c.PerConn, c.Function, indent(c.Extra, "    "))
	path := filepath.Join(dir, "weighter.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		return "", fmt.Errorf("write weighter config: %w", err)
	}
	return path, nil
}

// indent prefixes every non-empty line of s (a "k: v; k: v" or multi-line list) with pre.
func indent(s, pre string) string {
	var b strings.Builder
	for _, l := range strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == ';' }) {
		if l = strings.TrimSpace(l); l != "" {
			b.WriteString(pre + l + "\n")
		}
	}
	return b.String()
}
