package sources

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// TestSeriesComeOldestFirst: weighter.Series is oldest first, and the weighter's
// "last" and max_age rely on it. A reply whose datapoints are in another order
// (a Graphite-compatible server, a proxy) must still give ordered series, or the
// weighter would take a stale point for the newest.
func TestSeriesComeOldestFirst(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, `[{"target":"a","datapoints":[[3,1700000020],[1,1700000000],[null,1700000030],[2,1700000010]]},
			{"target":"b","datapoints":[[5,1700000000],[6,1700000010]]}]`)
	}))
	t.Cleanup(srv.Close)
	g, _ := newGraphite(t, srv.URL, func(c *GraphiteConfig) { c.Target = "x" })
	loads, err := g.Fetch(context.Background(), nil)
	require.NoError(t, err)
	assert.Equal(t, weighter.Loads{"a": series(1700000000, 1, 2, 3), "b": series(1700000000, 5, 6)}, loads)
}

// levelCounts counts the lines of a JSON log at each level.
func levelCounts(t *testing.T, logs string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(logs), "\n") {
		if l == "" {
			continue
		}
		var rec struct{ Level string }
		require.NoError(t, json.Unmarshal([]byte(l), &rec), l)
		out[rec.Level]++
	}
	return out
}

// TestLeftOutServersLoggedOncePerChange: a server with two series or without
// a valid point is warned about when that starts, with the labels that tell
// its two series apart, and once more when it is back, not at every fetch.
func TestLeftOutServersLoggedOncePerChange(t *testing.T) {
	var mu sync.Mutex
	body := `{"status":"success","data":{"resultType":"vector","result":[
		{"metric":{"server":"a","instance":"10.0.0.1:9100","job":"node"},"value":[1700000000,"1"]},
		{"metric":{"server":"a","instance":"10.0.0.2:9100","job":"node"},"value":[1700000000,"2"]},
		{"metric":{"server":"b"},"value":[1700000000,"NaN"]},
		{"metric":{"server":"c"},"value":[1700000000,"3"]}]}}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, body)
	}))
	t.Cleanup(srv.Close)
	p, logs := newProm(t, srv.URL, func(c *PrometheusConfig) { c.Query = "x" })
	for range 50 {
		loads, err := p.Fetch(context.Background(), nil)
		require.NoError(t, err)
		assert.Equal(t, map[string]float64{"c": 3}, lastValues(loads))
	}
	assert.Equal(t, 2, levelCounts(t, logs.String())["WARN"], "one warning per server in 50 fetches:\n%s", logs)
	assert.Contains(t, logs.String(), `"msg":"server left out","source":"prometheus","server":"a","reason":"duplicate series","differ":"instance: \"10.0.0.1:9100\" vs \"10.0.0.2:9100\""`)
	assert.Contains(t, logs.String(), `"msg":"server left out","source":"prometheus","server":"b","reason":"no valid point (null, NaN, Inf or negative)"`)

	logs.Reset()
	mu.Lock()
	body = `{"status":"success","data":{"resultType":"vector","result":[
		{"metric":{"server":"a"},"value":[1700000000,"1"]},
		{"metric":{"server":"b"},"value":[1700000000,"2"]},
		{"metric":{"server":"c"},"value":[1700000000,"3"]}]}}`
	mu.Unlock()
	for range 5 {
		_, err := p.Fetch(context.Background(), nil)
		require.NoError(t, err)
	}
	assert.Equal(t, map[string]int{"INFO": 1}, levelCounts(t, logs.String()), "%s", logs)
	assert.Contains(t, logs.String(), `"msg":"servers back in","source":"prometheus","reason":"their series are valid again","servers":2,"names":["a","b"]`)
}

// TestManyLeftOutServersAreCounted: when a whole backend's series turn null
// at once, a few servers are named and the rest counted, not one warning each.
func TestManyLeftOutServersAreCounted(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	rules, err := newNameRules(nil, "", nil)
	require.NoError(t, err)
	a := newAssembler(log, &redactor{}, rules)
	var raw []rawSeries
	for i := range 200 {
		raw = append(raw, rawSeries{name: fmt.Sprintf("s%03d", i), points: weighter.Series{{Value: math.NaN()}}})
	}
	raw = append(raw, rawSeries{name: "ok", points: weighter.Series{{Value: 1}}})
	for range 10 {
		a.assemble(raw)
	}
	assert.Equal(t, map[string]int{"WARN": shownServers + 1}, levelCounts(t, logs.String()), "%s", logs.String())
	assert.Contains(t, logs.String(), `"msg":"more servers left out","servers":195`)
}

// TestDuplicateGraphiteSeriesNamed: Graphite series have no labels; the two
// targets that map to one server are named.
func TestDuplicateGraphiteSeriesNamed(t *testing.T) {
	var logs bytes.Buffer
	node := 1
	rules, err := newNameRules(&node, "", nil)
	require.NoError(t, err)
	a := newAssembler(slog.New(slog.NewJSONHandler(&logs, nil)), &redactor{}, rules)
	a.assemble([]rawSeries{
		{name: "dc1.web1.load", points: weighter.Series{{Value: 1}}},
		{name: "dc2.web1.load", points: weighter.Series{{Value: 2}}},
	})
	assert.Contains(t, logs.String(), `"server":"web1","reason":"duplicate series","differ":"\"dc1.web1.load\" vs \"dc2.web1.load\""`)
}
