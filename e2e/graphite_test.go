package e2e

import (
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

func TestGraphiteOnceApply(t *testing.T) {
	h := testenv.StartHAProxy(t, haproxyConfig(t))
	g := testenv.StartGraphite(t)
	now := time.Now().Truncate(testenv.GraphiteStep)
	for _, s := range servers {
		var pts []weighter.Point
		for i := 6; i >= 1; i-- {
			pts = append(pts, weighter.Point{Time: now.Add(-time.Duration(i) * testenv.GraphiteStep), Value: loads[s]})
		}
		g.Write(t, "ingest."+s+".rate", pts...)
	}
	cfg := writeConfig(t, fmt.Sprintf(`listen: ""
haproxy: {socket: %s}
backends:
  - name: be_ingest
    source:
      graphite: {url: %q, target: "aliasByNode(ingest.*.rate, 1)", from: -5min}
    max_step: 0
    deadband: 0
`, h.Socket, g.URL))

	r := runCmd(t, "once", "--config", cfg, "--apply")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if got := planTable(t, r.stdout); !maps.Equal(got, want) {
		t.Errorf("plan %v, want %v\n%s", got, want, r.stdout)
	}
	if got := testenv.Weights(t, h.Socket, "be_ingest"); !maps.Equal(got, want) {
		t.Errorf("weights %v, want %v", got, want)
	}
}
