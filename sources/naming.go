package sources

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/haproxy-weighter/haproxy-weighter/internal/field"
)

// nameRules turns the name a monitoring system gives a series (a Graphite target,
// a Prometheus label value) into the server name HAProxy knows. The rules apply in
// order: node index (Graphite only), regex capture, explicit map. A series that a
// configured rule cannot place is not one of ours and is dropped.
type nameRules struct {
	node  *int           // aliasByNode-style index into the dotted metric path
	re    *regexp.Regexp // first capture group (or the group named "server") is the name
	table map[string]string
}

// newNameRules compiles the rules; field names in errors are the yaml keys.
func newNameRules(node *int, expr string, table map[string]string) (*nameRules, error) {
	n := &nameRules{node: node, table: table}
	for k, v := range table {
		if v == "" {
			return nil, field.Errorf("server_map", "server_map: %q maps to an empty name", k)
		}
	}
	if expr == "" {
		return n, nil
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, field.Wrap(fmt.Errorf("server_regex: %w", err), "server_regex")
	}
	if re.NumSubexp() == 0 {
		return nil, field.Errorf("server_regex", "server_regex: %q has no capture group", expr)
	}
	n.re = re
	return n, nil
}

// server maps a series name to a server name; ok is false when the series is not ours.
func (n *nameRules) server(name string) (server string, ok bool) {
	server = name
	if n.node != nil {
		if server, ok = pathNode(server, *n.node); !ok {
			return "", false
		}
	}
	if n.re != nil {
		if server, ok = n.capture(server); !ok {
			return "", false
		}
	}
	if n.table != nil {
		server, ok = n.table[server]
		return server, ok && server != ""
	}
	return server, server != ""
}

func (n *nameRules) capture(s string) (string, bool) {
	m := n.re.FindStringSubmatch(s)
	if m == nil {
		return "", false
	}
	if i := n.re.SubexpIndex("server"); i > 0 {
		return m[i], m[i] != ""
	}
	return m[1], m[1] != ""
}

// pathNode returns node i (negative counts from the end) of the metric path inside
// a Graphite target, the way aliasByNode does: "perSecond(tcp.node-1.rx)" has
// path "tcp.node-1.rx", whose node 1 is "node-1".
func pathNode(target string, i int) (string, bool) {
	nodes := strings.Split(metricPath(target), ".")
	if i < 0 {
		i += len(nodes)
	}
	if i < 0 || i >= len(nodes) {
		return "", false
	}
	return nodes[i], nodes[i] != ""
}

// metricPath extracts the innermost metric path of a target expression and drops
// Graphite tags (";tag=value").
func metricPath(target string) string {
	s := target
	if i := strings.LastIndexByte(s, '('); i >= 0 {
		s = s[i+1:]
	}
	if i := strings.IndexAny(s, ",)"); i >= 0 {
		s = s[:i]
	}
	if i := strings.IndexByte(s, ';'); i >= 0 {
		s = s[:i]
	}
	return strings.TrimSpace(s)
}
