package sources

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/duration"
)

// answer serves one fixed Prometheus API reply.
func answer(t *testing.T, status int, body string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprint(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestPrometheusNativeHistograms: a sample that is a native histogram has no
// float value (model.Sample.Value is 0). Read as load 0 it made the server the
// lightest there is; it is a query that needs histogram_count() or the like.
func TestPrometheusNativeHistograms(t *testing.T) {
	const h = `{"count":"5","sum":"3","buckets":[[0,"0","1","5"]]}`
	for name, c := range map[string]struct {
		rng  time.Duration
		body string
	}{
		"vector": {0, `{"status":"success","data":{"resultType":"vector","result":[
			{"metric":{"server":"a"},"value":[1700000000,"7"]},
			{"metric":{"server":"b"},"histogram":[1700000000,` + h + `]}]}}`},
		"matrix": {time.Minute, `{"status":"success","data":{"resultType":"matrix","result":[
			{"metric":{"server":"a"},"values":[[1700000000,"7"]]},
			{"metric":{"server":"b"},"histograms":[[1700000000,` + h + `]]}]}}`},
	} {
		t.Run(name, func(t *testing.T) {
			p, _ := newProm(t, answer(t, http.StatusOK, c.body), func(cfg *PrometheusConfig) {
				cfg.Query, cfg.Range, cfg.Step = "x", duration.Duration(c.rng), duration.Duration(c.rng)
			})
			loads, err := p.Fetch(context.Background(), nil)
			require.ErrorIs(t, err, ErrBadReply, "loads %v", loads)
			assert.ErrorContains(t, err, `native histogram (series with server "b")`)
		})
	}
}

// TestPrometheusSlowQuery: Prometheus is told a shorter timeout than the
// source's own, so a query too slow to finish comes back as Prometheus' own
// "query timed out" instead of the source giving up first with "context
// deadline exceeded", the same as an unreachable server. The fake does what
// Prometheus does with the timeout parameter.
func TestPrometheusSlowQuery(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		limit, err := model.ParseDuration(r.FormValue("timeout")) // as Prometheus does: "1.6s" is refused
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		select {
		case <-time.After(time.Duration(limit)):
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, `{"status":"error","errorType":"timeout","error":"query timed out in expression evaluation"}`)
	}))
	t.Cleanup(srv.Close)
	// The source's timeout, then a cycle deadline shorter than it: Prometheus
	// must be told a fraction of whichever ends first.
	for _, c := range []struct{ timeout, deadline time.Duration }{{time.Second, time.Minute}, {time.Minute, time.Second}} {
		p, _ := newProm(t, srv.URL, func(cfg *PrometheusConfig) { cfg.Query, cfg.Timeout = "x", duration.Duration(c.timeout) })
		ctx, cancel := context.WithTimeout(context.Background(), c.deadline)
		_, err := p.Fetch(ctx, nil)
		cancel()
		require.Error(t, err)
		assert.NotErrorIs(t, err, ErrUnreachable, "timeout %s, deadline %s", c.timeout, c.deadline)
		assert.ErrorContains(t, err, "query timed out in expression evaluation")
	}
}

// TestPrometheusNegativeSamples: a load below zero (a gauge gone wrong, a
// derivative over a counter reset) is no load. The weighter ignores such
// points; the source leaves them out like NaN and says which server lost its
// data, so the operator learns why it is held or unweighted.
func TestPrometheusNegativeSamples(t *testing.T) {
	p, logs := newProm(t, answer(t, http.StatusOK, `{"status":"success","data":{"resultType":"vector","result":[
		{"metric":{"server":"a"},"value":[1700000000,"-5"]},
		{"metric":{"server":"b"},"value":[1700000000,"3"]}]}}`), func(c *PrometheusConfig) { c.Query = "x" })
	loads, err := p.Fetch(context.Background(), nil)
	require.NoError(t, err)
	assert.Equal(t, map[string]float64{"b": 3}, lastValues(loads))
	assert.Contains(t, logs.String(), `"msg":"server left out","source":"prometheus","server":"a","reason":"no valid point (null, NaN, Inf or negative)"`)
}

// TestPrometheusBadReplies pins how replies that are not a usable API answer
// are told apart (bad reply, rejected query), with what the server said in the
// error: none of them is "unreachable", which would send the operator to the
// network. client_golang decides much of this, so an upgrade can change it.
func TestPrometheusBadReplies(t *testing.T) {
	const vec = `{"status":"success","data":{"resultType":"vector","result":`
	for _, c := range []struct {
		status int
		body   string
		kind   error
		says   string
	}{
		{200, `{}`, ErrBadReply, "empty result"},
		{200, `[]`, ErrBadReply, "cannot unmarshal array"},
		{200, vec + `{}}}`, ErrBadReply, "model.Vector"},
		{200, vec + `[{"metric":{"server":"a"},"value":[1,"x"]}]}}`, ErrBadReply, `parsing "x"`},
		{200, `{"status":"success","data":{"resultType":"string","result":[1,"x"]}}`, ErrBadReply, `unexpected value type "string"`},
		{200, vec + `[{"metric":{"server":"a"},"value":[1,"1"]}]`, ErrBadReply, "unexpected end of JSON input"},
		{200, `<html>Sign in</html>`, ErrBadReply, "invalid character '<'"},
		{200, `{"status":"error","errorType":"execution","error":"many-to-many matching not allowed"}`, ErrQuery, "many-to-many"},
		{400, `<html>400 Request Header Too Large</html>`, ErrQuery, "400 Request Header Too Large"},
		{401, `<html>401 Authorization Required</html>`, ErrQuery, "401 Authorization Required"},
		{502, `<html>502 Bad Gateway</html>`, ErrBadReply, "502 Bad Gateway"},
	} {
		p, _ := newProm(t, answer(t, c.status, c.body), func(cfg *PrometheusConfig) { cfg.Query = "x" })
		_, err := p.Fetch(context.Background(), nil)
		require.ErrorIs(t, err, c.kind, "%d %s", c.status, c.body)
		assert.ErrorContains(t, err, c.says, "%d %s", c.status, c.body)
	}
}

// TestPrometheusNoServerNameSaysWhatCame: when no series yields a server (the
// label is not there, the regex or map matches nothing), the error shows a
// series' labels, which is what tells the operator which setting is wrong.
func TestPrometheusNoServerNameSaysWhatCame(t *testing.T) {
	p, _ := newProm(t, answer(t, http.StatusOK, `{"status":"success","data":{"resultType":"vector","result":[
		{"metric":{"instance":"node-1:9100","job":"node"},"value":[1700000000,"1"]}]}}`), func(c *PrometheusConfig) { c.Query = "x" })
	_, err := p.Fetch(context.Background(), nil)
	require.ErrorIs(t, err, ErrNoData)
	assert.ErrorContains(t, err, `server_label "server"`)
	assert.ErrorContains(t, err, `{instance="node-1:9100", job="node"}`)
}
