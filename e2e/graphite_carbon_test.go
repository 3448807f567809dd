package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
)

// carbonInterval is the test carbon's CARBON_METRIC_INTERVAL (60 s by
// default): short, so that a few of its counts come in seconds.
const carbonInterval = 2 * time.Second

// TestGraphiteCarbonExample runs examples/config/graphite-carbon.yaml against
// two real carbon-cache instances that report what they receive in their own
// carbon.agents.<host>-<instance>.metricsReceived, while the test sends each
// datapoints at a known rate: the example's target (scale by 1/interval) and
// server_regex give each HAProxy server the datapoints/s it was sent. The
// README's earlier form, perSecond() of the same metric, is warned of by
// validate and once.
func TestGraphiteCarbonExample(t *testing.T) {
	g := testenv.StartGraphiteWith(t, testenv.GraphiteOptions{Instances: []string{"a", "b"}, MetricInterval: carbonInterval})
	h := testenv.StartHAProxy(t, testenv.HAProxyDefaults+fmt.Sprintf(
		"backend be_carbon\n  balance leastconn\n  server cache-a 127.0.0.1:%d weight 100\n  server cache-b 127.0.0.1:%d weight 100\n",
		testenv.FreePort(t), testenv.FreePort(t)))
	agents := map[string]string{testenv.CarbonAgent(t, "a"): "cache-a", testenv.CarbonAgent(t, "b"): "cache-b"}

	// Counts stamped from start+2 on are of intervals that began after the
	// senders started: carbon stamps each count with the end of its interval
	// (and whisper with the start of that second's 2 s step).
	start := time.Now()
	from := start.Unix() + 3
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	rates := map[string]float64{"cache-a": 300, "cache-b": 100} // datapoints/s sent
	sent := map[string]*sender{}
	for inst, server := range map[string]string{"a": "cache-a", "b": "cache-b"} {
		s := &sender{rate: rates[server], port: g.LinePort(t, inst), name: server}
		sent[server] = s
		wg.Add(1)
		go func() { defer wg.Done(); s.run(ctx, t) }()
	}
	waitCarbonCounts(t, g.URL, from, 4)

	example, err := os.ReadFile("../examples/config/graphite-carbon.yaml")
	if err != nil {
		t.Fatal(err)
	}
	right := carbonConfig(t, example, h.Socket, g.URL, from, agents, func(target string) string {
		if !strings.Contains(target, "0.0166667") {
			t.Fatalf("the example's target %q does not scale by 1/60 s", target)
		}
		return strings.Replace(target, "0.0166667", strconv.FormatFloat(1/carbonInterval.Seconds(), 'g', -1, 64), 1)
	})
	wrong := carbonConfig(t, example, h.Socket, g.URL, from, agents, func(string) string {
		return "perSecond(carbon.agents.*.metricsReceived)" // the README's form, on carbon's own metric
	})

	r := runCmd(t, "validate", right)
	if r.code != 0 || strings.Contains(r.stderr, "warning") {
		t.Errorf("validate of the example: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runCmd(t, "validate", wrong)
	if r.code != 0 || !strings.Contains(r.stderr, "warning: backends[0] (be_carbon): source: graphite: target: perSecond() of carbon's own metrics") ||
		!strings.Contains(r.stderr, "count per CARBON_METRIC_INTERVAL") {
		t.Errorf("validate of perSecond(metricsReceived): exit %d, want 0 and the warning\n%s%s", r.code, r.stdout, r.stderr)
	}

	got := onceLoads(t, right)
	for server, s := range sent {
		truth := s.sentRate()
		t.Logf("%s: sent %.1f datapoints/s (asked %v), the example's target read %.1f", server, truth, s.rate, got[server])
		if d := got[server]/truth - 1; d < -0.15 || d > 0.15 {
			t.Errorf("%s: the example's target read %.1f datapoints/s, the test sent %.1f", server, got[server], truth)
		}
	}
	r = runCmd(t, "once", "--config", wrong, "--output", "json")
	if !strings.Contains(r.stderr, "perSecond() of carbon's own metrics") {
		t.Errorf("once with perSecond(metricsReceived) did not warn\n%s", r.stderr)
	}
	// The change from one count to the next: 0 for counts that hold still
	// (a steady sender), nulls and small numbers for real traffic's.
	wrongLoads := jsonLoads(t, r.stdout)
	t.Logf("perSecond(carbon.agents.*.metricsReceived) read: %v", wrongLoads)
	for server, s := range sent {
		if wrongLoads[server] > s.rate/2 {
			t.Errorf("%s: perSecond of carbon's counts read %.1f, near the %v datapoints/s sent: the warning would be wrong", server, wrongLoads[server], s.rate)
		}
	}
}

// carbonConfig writes the example with this test's HAProxy socket, Graphite,
// window, carbon's agents as HAProxy's servers, and its target changed by
// target; fast_signal off, so that once shows the source's loads (and
// shed, which needs the fast signal, left out).
func carbonConfig(t *testing.T, example []byte, socket, graphiteURL string, from int64, agents map[string]string, target func(string) string) string {
	t.Helper()
	var cfg map[string]any
	if err := yaml.Unmarshal(example, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["listen"] = ""
	cfg["haproxy"] = map[string]any{"socket": socket}
	b := cfg["backends"].([]any)[0].(map[string]any)
	b["fast_signal"] = "off"
	delete(b, "shed")
	b["max_step"] = 0
	gr := b["source"].(map[string]any)["graphite"].(map[string]any)
	gr["url"], gr["from"], gr["server_map"] = graphiteURL, strconv.FormatInt(from, 10), agents
	gr["target"] = target(gr["target"].(string))
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return writeConfig(t, string(out))
}

// onceLoads runs once on config and returns each server's load.
func onceLoads(t *testing.T, config string) map[string]float64 {
	t.Helper()
	r := runCmd(t, "once", "--config", config, "--output", "json")
	if r.code != 0 {
		t.Fatalf("once: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	return jsonLoads(t, r.stdout)
}

func jsonLoads(t *testing.T, out string) map[string]float64 {
	t.Helper()
	var cycles []struct {
		Plan struct {
			Servers []struct {
				Server string   `json:"server"`
				Load   *float64 `json:"load"`
			} `json:"servers"`
		} `json:"plan"`
	}
	if err := json.Unmarshal([]byte(out), &cycles); err != nil || len(cycles) != 1 {
		t.Fatalf("once --output json: %v\n%s", err, out)
	}
	loads := map[string]float64{}
	for _, s := range cycles[0].Plan.Servers {
		if s.Load != nil {
			loads[s.Server] = *s.Load
		}
	}
	return loads
}

// waitCarbonCounts waits until every carbon-cache has written n counts of
// metricsReceived stamped from from on.
func waitCarbonCounts(t *testing.T, graphiteURL string, from int64, n int) {
	t.Helper()
	q := url.Values{"target": {"carbon.agents.*.metricsReceived"}, "from": {strconv.FormatInt(from, 10)}, "format": {"json"}}
	last := ""
	defer func() {
		if t.Failed() {
			t.Logf("last render: %s", last)
		}
	}()
	testenv.WaitWithin(t, 30*time.Second, "carbon's own counts", func() bool {
		last = carbonCounts(graphiteURL+"/render?"+q.Encode(), n)
		return last == ""
	})
}

// carbonCounts renders u and says what is missing for each series to hold n
// valid points, or "".
func carbonCounts(u string, n int) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	var reply []struct {
		Target     string        `json:"target"`
		Datapoints [][2]*float64 `json:"datapoints"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&reply); err != nil {
		return err.Error()
	}
	if len(reply) < 2 {
		return fmt.Sprintf("%d carbon agents rendered", len(reply))
	}
	for _, s := range reply {
		valid := 0
		for _, dp := range s.Datapoints {
			if dp[0] != nil {
				valid++
			}
		}
		if valid < n {
			return fmt.Sprintf("%s: %d counts", s.Target, valid)
		}
	}
	return ""
}

// sender writes datapoints to a carbon-cache's plaintext port at rate per
// second, catching up after a late tick, until ctx ends.
type sender struct {
	rate  float64
	port  int
	name  string
	mu    sync.Mutex
	start time.Time
	n     int
}

func (s *sender) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// sentRate is what the sender sent per second so far.
func (s *sender) sentRate() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return float64(s.n) / time.Since(s.start).Seconds()
}

func (s *sender) run(ctx context.Context, t *testing.T) {
	c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(s.port), 5*time.Second)
	if err != nil {
		t.Errorf("sender %s: %v", s.name, err)
		return
	}
	defer c.Close()
	s.mu.Lock()
	s.start = time.Now()
	start := s.start
	s.mu.Unlock()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			var b strings.Builder
			due := int(s.rate * now.Sub(start).Seconds())
			for i := s.count(); i < due; i++ {
				fmt.Fprintf(&b, "test.sent.%s.m%d %d %d\n", s.name, i%5, i, now.Unix())
			}
			if b.Len() == 0 {
				continue
			}
			_ = c.SetWriteDeadline(now.Add(5 * time.Second))
			if _, err := c.Write([]byte(b.String())); err != nil {
				if ctx.Err() == nil {
					t.Errorf("sender %s: %v", s.name, err)
				}
				return
			}
			s.mu.Lock()
			s.n = due
			s.mu.Unlock()
		}
	}
}
