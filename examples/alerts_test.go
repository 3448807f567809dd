package examples

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// ourMetrics are metric names (without the haproxy_weighter_ prefix) the dashboard and the
// alerts use that a daemon weighting one backend by HAProxy's session counts exports at once
// (TestDaemonSdNotify scrapes them); whether a name exists at all is asked of the daemon's
// registry (exportedName).
var ourMetrics = []string{
	"server_weight", "server_load", "backend_imbalance", "cycles_total", "cycle_duration_seconds",
	"weight_writes_total", "last_success_timestamp_seconds", "ready", "config_reload_success",
	"server_desired_weight", "dry_run", "dry_run_weight_writes_total",
	"haproxy_socket_up", "backend_socket_info", "server_info",
}

var metricRe = regexp.MustCompile(`\bhaproxy_weighter_[a-z0-9_]+`)

// baseMetric strips the suffixes Prometheus adds to a histogram's series.
func baseMetric(name string) string {
	for _, suf := range []string{"_bucket", "_sum", "_count"} {
		if b, ok := strings.CutSuffix(name, suf); ok && strings.HasPrefix(b, "haproxy_weighter_cycle_duration_seconds") {
			return b
		}
	}
	return name
}

func TestAlertRulesPromtool(t *testing.T) {
	promtool := requireTool(t, "promtool", "apt-get install prometheus")
	out := run(t, time.Minute, promtool, "check", "rules", "prometheus/alerts.yml")
	if !strings.Contains(out, "SUCCESS: 12 rules found") {
		t.Errorf("promtool check rules: want 12 rules, got:\n%s", out)
	}
	// The unit tests make every alert fire (and not fire) on synthetic series.
	run(t, time.Minute, promtool, "test", "rules", "prometheus/alerts_test.yml")
}

type ruleFile struct {
	Groups []struct {
		Rules []struct {
			Alert  string `yaml:"alert"`
			Record string `yaml:"record"`
			Expr   string `yaml:"expr"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

func alertExprs(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var rf ruleFile
	if err := yaml.Unmarshal(b, &rf); err != nil {
		t.Fatalf("alerts.yml: %v", err)
	}
	exprs := map[string]string{}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			exprs["alert "+r.Alert] = r.Expr
		}
	}
	return exprs
}

type dashboard struct {
	Title  string `json:"title"`
	Panels []struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Definition string `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
}

// dashboardExprs returns every PromQL expression of the dashboard, keyed by panel title.
func dashboardExprs(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("grafana/haproxy-weighter.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	exprs := map[string]string{}
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for i, tg := range p.Targets {
			exprs[fmt.Sprintf("panel %q #%d", p.Title, i)] = tg.Expr
		}
	}
	for _, v := range d.Templating.List {
		if v.Definition != "" {
			exprs["variable "+v.Name] = v.Definition
		}
	}
	return exprs
}

func TestDashboardAndAlertsNameOurMetrics(t *testing.T) {
	all := dashboardExprs(t)
	for k, v := range alertExprs(t) {
		all[k] = v
	}
	used := map[string]bool{}
	reg := daemonRegistry(t)
	for where, expr := range all {
		names := metricRe.FindAllString(expr, -1)
		if len(names) == 0 && !strings.HasPrefix(strings.TrimSpace(expr), "up{") {
			t.Errorf("%s: names none of our metrics: %s", where, expr)
		}
		for _, n := range names {
			short := strings.TrimPrefix(baseMetric(n), "haproxy_weighter_")
			if !exportedName(t, reg, n) {
				t.Errorf("%s: %s is not a haproxy-weighter metric", where, n)
			}
			used[short] = true
		}
	}
	// The dashboard shows weights, loads, imbalance and cycle results; the alerts cover
	// not ready, imbalance and source errors.
	// And, to compare a shadow week with a live one, desired weights and the dry-run state.
	for _, m := range []string{"server_weight", "server_load", "backend_imbalance", "cycles_total", "ready",
		"server_desired_weight", "dry_run", "dry_run_weight_writes_total"} {
		if !used[m] {
			t.Errorf("no panel or alert uses haproxy_weighter_%s", m)
		}
	}
	alerts := alertExprs(t)
	for _, a := range []string{"HAProxyWeighterNotReady", "HAProxyWeighterImbalanceHigh", "HAProxyWeighterSourceErrors"} {
		if _, ok := alerts["alert "+a]; !ok {
			t.Errorf("alert %s missing", a)
		}
	}
}

// Grafana variables are not PromQL: give them values so promtool can parse the queries.
var grafanaVars = strings.NewReplacer(`$__rate_interval`, `5m`, `$instance`, `.*`, `$backend`, `.*`)

func TestDashboardQueriesParse(t *testing.T) {
	promtool := requireTool(t, "promtool", "apt-get install prometheus")
	var b strings.Builder
	b.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	i := 0
	for where, expr := range dashboardExprs(t) {
		if strings.HasPrefix(where, "variable ") {
			continue // label_values() is Grafana's, not PromQL
		}
		i++
		q, _ := json.Marshal(grafanaVars.Replace(expr)) // a JSON string is a valid YAML scalar
		fmt.Fprintf(&b, "      - record: dashboard:query_%d\n        expr: %s\n", i, q)
	}
	path := filepath.Join(t.TempDir(), "dashboard-rules.yml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out := run(t, time.Minute, promtool, "check", "rules", path)
	if want := fmt.Sprintf("SUCCESS: %d rules found", i); !strings.Contains(out, want) {
		t.Errorf("promtool: want %q, got:\n%s", want, out)
	}
}
