package sources

import (
	"encoding/json"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// FuzzParseGraphite feeds arbitrary bytes to the render reply decoder and the
// name mapping after it: no panic, and what comes out is usable by the weighter.
// Seeds: testdata/fuzz/FuzzParseGraphite and the recorded replies in ../testdata/.
func FuzzParseGraphite(f *testing.F) {
	for _, name := range []string{"graphite-web-1.1.8/render-persecond-alias.json", "graphite-web-1.1.8/render-nulls.json"} {
		body, err := os.ReadFile(filepath.Join("..", "testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(body)
	}
	rules, err := newNameRules(intp(1), "", nil)
	if err != nil {
		f.Fatal(err)
	}
	red := newRedactor("http://g")
	log := slog.New(slog.DiscardHandler)
	f.Fuzz(func(t *testing.T, body []byte) {
		raw, err := parseGraphite(body)
		if err != nil {
			return
		}
		if !json.Valid(body) {
			t.Fatalf("accepted invalid JSON %q", body)
		}
		for _, r := range raw {
			for _, p := range r.points {
				if p.Time.IsZero() || p.Time.Unix() < 0 {
					t.Fatalf("series %q: bad time %v", r.name, p.Time)
				}
			}
		}
		for server, s := range newAssembler(log, red, rules).assemble(raw) {
			if server == "" || strings.Contains(server, ".") || len(s) == 0 {
				t.Fatalf("server %q with %d points", server, len(s))
			}
			if !slices.IsSortedFunc(s, byTime) {
				t.Fatalf("server %q: points not oldest first", server)
			}
			for _, p := range s {
				if math.IsNaN(p.Value) || math.IsInf(p.Value, 0) {
					t.Fatalf("server %q: invalid value %v", server, p.Value)
				}
			}
		}
	})
}

// FuzzNameRules checks the mapping rules never panic and never invent a name:
// a mapped name is non-empty, one of the map's values when a map is set, and a
// single path node when only a node index is set.
func FuzzNameRules(f *testing.F) {
	f.Add("perSecond(tcp.node-1.datapoints.received)", 1, true, "", "node-1", "web1")
	f.Add("node-3:9100", 0, false, `^([^:]+):\d+$`, "", "")
	f.Add("eu-node-7", 0, false, `(?P<server>node-\d+)`, "node-7", "web7")
	f.Add("a.b;tag=v", -1, true, "", "", "")
	f.Fuzz(func(t *testing.T, series string, node int, useNode bool, regex, key, value string) {
		var np *int
		if useNode {
			np = &node
		}
		var table map[string]string
		if key != "" {
			table = map[string]string{key: value}
		}
		rules, err := newNameRules(np, regex, table)
		if err != nil {
			return
		}
		got, ok := rules.server(series)
		switch {
		case !ok && got != "":
			t.Fatalf("dropped series returned name %q", got)
		case !ok:
		case got == "":
			t.Fatal("empty server name accepted")
		case table != nil && got != value:
			t.Fatalf("name %q not from the map", got)
		case useNode && regex == "" && table == nil && strings.Contains(got, "."):
			t.Fatalf("node %d of %q is %q, not one node", node, series, got)
		}
	})
}
