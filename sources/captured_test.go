package sources

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
)

// capturedAt is the evaluation time of the replies in ../testdata/prometheus-2.42.0.
const capturedAt = 1796036800

// capturedPrometheus is the data the Prometheus replies were captured from: an
// hour before capturedAt, a point every 15 s. The counters grow at 10, 20, 40
// and 5 per second.
func capturedPrometheus() string {
	d := testenv.PromSamples(time.Unix(capturedAt-3600, 0), 15*time.Second, 241).Type("datapoints_received", "counter")
	for _, s := range []struct {
		server string
		rate   float64
	}{{"node-1", 10}, {"node-2", 20}, {"node-3", 40}, {"other-host", 5}} {
		d.Rate("datapoints_received_total", fmt.Sprintf("server=%q", s.server), s.rate)
	}
	d.Type("node_load1", "gauge")
	for _, s := range []struct {
		instance string
		load     float64
	}{{"node-1:9100", 0.5}, {"node-2:9100", 1.5}} {
		d.Constant("node_load1", fmt.Sprintf("instance=%q", s.instance), s.load)
	}
	return d.Type("weighter_mixed", "gauge").
		Constant("weighter_mixed", `server="node-1"`, math.NaN()).
		Constant("weighter_mixed", `server="node-2",shard="a"`, 1).
		Constant("weighter_mixed", `server="node-2",shard="b"`, 2).
		Constant("weighter_mixed", `server="node-3"`, 3).
		String()
}

// capturedRequests are the API requests behind each reply, by file name.
var capturedRequests = []struct{ file, path string }{
	{"query-rate.json", "/api/v1/query?" + url.Values{
		"query": {"rate(datapoints_received_total[1m])"}, "time": {strconv.Itoa(capturedAt)}}.Encode()},
	{"query_range-load1.json", "/api/v1/query_range?" + url.Values{
		"query": {"node_load1"}, "start": {strconv.Itoa(capturedAt - 300)}, "end": {strconv.Itoa(capturedAt)}, "step": {"60"}}.Encode()},
	{"query-nan-duplicate.json", "/api/v1/query?" + url.Values{
		"query": {"weighter_mixed"}, "time": {strconv.Itoa(capturedAt)}}.Encode()},
	{"query-parse-error-400.json", "/api/v1/query?" + url.Values{
		"query": {"rate(x[1m]"}, "time": {strconv.Itoa(capturedAt)}}.Encode()},
}

// TestCapturedPrometheusReplies asks the real Prometheus the requests behind the
// committed replies again and checks that each committed reply has the same
// shape (keys, result type, label sets, timestamps, status and error) and the
// same values, to 9 significant digits (a rate's last digits depend on float
// rounding). A Prometheus that changes its API replies fails here.
func TestCapturedPrometheusReplies(t *testing.T) {
	prom := testenv.StartPrometheus(t, capturedPrometheus())
	client := &http.Client{Timeout: 10 * time.Second}
	for _, r := range capturedRequests {
		t.Run(r.file, func(t *testing.T) {
			resp, err := client.Get(prom.URL + r.path)
			require.NoError(t, err)
			fresh, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.NoError(t, err)
			committed, err := os.ReadFile(filepath.Join("..", "testdata", "prometheus-2.42.0", r.file))
			require.NoError(t, err)
			assert.Equal(t, promShape(t, fresh), promShape(t, committed), "fresh reply:\n%s", fresh)
			if strings.HasSuffix(r.file, "-400.json") {
				assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
			} else {
				assert.Equal(t, http.StatusOK, resp.StatusCode)
			}
		})
	}
}

// promShape decodes a reply with every sample value ("9.999999999999998")
// rounded to 9 significant digits.
func promShape(t *testing.T, body []byte) any {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal(body, &v), "%s", body)
	var walk func(v any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				x[k] = walk(e)
			}
			if sample, ok := x["value"].([]any); ok && len(sample) == 2 {
				x["value"] = roundSample(sample)
			}
			if samples, ok := x["values"].([]any); ok {
				for i, s := range samples {
					if sample, ok := s.([]any); ok && len(sample) == 2 {
						samples[i] = roundSample(sample)
					}
				}
			}
		case []any:
			for i, e := range x {
				x[i] = walk(e)
			}
		}
		return v
	}
	return walk(v)
}

func roundSample(sample []any) []any {
	if s, ok := sample[1].(string); ok {
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			return []any{sample[0], strconv.FormatFloat(f, 'g', 9, 64)}
		}
	}
	return sample
}
