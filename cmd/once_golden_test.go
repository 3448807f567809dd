package cmd

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/ from the current output")

// goldenLoads are the loads Prometheus serves, per backend and server. be_api's
// s3 has no series (no data), its s4 is disabled in HAProxy (maintenance).
var goldenLoads = map[string]map[string]float64{
	"be_ingest": {"s1": 10, "s2": 20, "s3": 40, "s4": 80},
	"be_api":    {"s1": 5, "s2": 5.5, "s4": 50},
}

// goldenHAProxy has both backends at weight 100 everywhere; be_api's s4 is
// disabled. The servers' ports are fixed, as the output shows them: nothing
// connects to them (no health checks, no traffic).
const goldenHAProxy = testenv.HAProxyDefaults + `
backend be_ingest
  balance leastconn
  server s1 127.0.0.1:10001 weight 100
  server s2 127.0.0.1:10002 weight 100
  server s3 127.0.0.1:10003 weight 100
  server s4 127.0.0.1:10004 weight 100
backend be_api
  balance roundrobin
  server s1 127.0.0.1:10011 weight 100
  server s2 127.0.0.1:10012 weight 100
  server s3 127.0.0.1:10013 weight 100
  server s4 127.0.0.1:10014 weight 100 disabled
`

// goldenPrometheus is a gauge per server, a point every 15 s from 30 min before
// now to 30 min after, so that the instant query at any moment of the test reads
// exactly the load.
func goldenPrometheus(now time.Time) string {
	d := testenv.PromHour(now, 15*time.Second).Type("weighter_load", "gauge")
	for _, backend := range []string{"be_api", "be_ingest"} {
		for _, server := range []string{"s1", "s2", "s3", "s4"} {
			if load, ok := goldenLoads[backend][server]; ok {
				d.Constant("weighter_load", fmt.Sprintf("backend=%q,server=%q", backend, server), load)
			}
		}
	}
	return d.String()
}

// timeField is the plan's time in `once -o json`, the one value that changes
// from run to run.
var timeField = regexp.MustCompile(`"time": "[^"]*"`)

// TestOnceGolden runs `once` (table, then JSON) against a real HAProxy and a
// real Prometheus serving fixed loads, with the default policy, and compares
// stdout with cmd/testdata/once-table.golden and once-json.golden. The plan's
// time is replaced by "<time>". After a deliberate change of the output:
//
//	go test ./cmd -run TestOnceGolden -update
func TestOnceGolden(t *testing.T) {
	h := testenv.StartHAProxy(t, goldenHAProxy)
	prom := testenv.StartPrometheus(t, goldenPrometheus(time.Now()))
	config := filepath.Join(t.TempDir(), "config.yaml")
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "listen: \"\"\nhaproxy: {socket: %s}\nbackends:\n", h.Socket)
	for _, backend := range []string{"be_ingest", "be_api"} {
		fmt.Fprintf(&cfg, "  - name: %s\n    source: {prometheus: {url: %q, query: 'weighter_load{backend=%q}', server_label: server}}\n",
			backend, prom.URL, backend)
	}
	require.NoError(t, os.WriteFile(config, []byte(cfg.String()), 0o600))

	for _, tt := range []struct{ golden, output string }{
		{"once-table.golden", "table"},
		{"once-json.golden", "json"},
	} {
		t.Run(tt.output, func(t *testing.T) {
			var out, errb bytes.Buffer
			require.Equal(t, 0, executeArgs([]string{"once", "--config", config, "--output", tt.output}, &out, &errb), "stderr:\n%s", errb.String())
			got := timeField.ReplaceAllString(out.String(), `"time": "<time>"`)
			path := filepath.Join("testdata", tt.golden)
			if *update {
				require.NoError(t, os.MkdirAll("testdata", 0o755))
				require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err, "go test ./cmd -run TestOnceGolden -update writes it")
			assert.Equal(t, string(want), got, "once --output %s differs from %s (-update rewrites it)", tt.output, path)
		})
	}
	// A dry run: HAProxy still has the configured weights.
	assert.Equal(t, map[string]int{"s1": 100, "s2": 100, "s3": 100, "s4": 100}, testenv.Weights(t, h.Socket, "be_ingest"))
}
