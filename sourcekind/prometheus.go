package sourcekind

import (
	"github.com/prometheus/common/model"

	"github.com/haproxy-weighter/haproxy-weighter/sources"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// prometheus is `source: {prometheus: {…}}`: a PromQL query returning one
// series per server, an external metric that calibrates the fast signal.
var prometheus = erase(Spec[sources.PrometheusConfig]{
	Name:      "prometheus",
	Default:   sources.DefaultPrometheusConfig,
	Validate:  func(c *sources.PrometheusConfig) error { return c.Validate() },
	ServerMap: func(c *sources.PrometheusConfig) map[string]string { return c.ServerMap },
	Window: func(c *sources.PrometheusConfig) Window {
		// A point of rate(x[1m]) averages the last minute: the largest range
		// in the query is the span of its value.
		if d, ok := sources.PromQLWindow(c.Query); ok {
			return Window{Span: d, How: "the query's range [" + model.Duration(d).String() + "]"}
		}
		return Window{}
	},
	// The fast signal weighs both directions; the calibration maps them
	// onto whatever the query measures.
	FastBytes:  func(*sources.PrometheusConfig) (weighter.Bytes, bool) { return weighter.BytesBoth, true },
	Calibrates: true,
	Flags: []Flag[sources.PrometheusConfig]{
		{Name: "prometheus-url", Key: "url", Usage: "Prometheus base URL (load source)",
			Set: func(c *sources.PrometheusConfig, v string) { c.URL = v }},
		{Name: "query", Key: "query", Usage: "PromQL query returning one series per server",
			Set: func(c *sources.PrometheusConfig, v string) { c.Query = v }},
		{Name: "server-label", Key: "server_label", Usage: "label naming the server in the query result (default server)",
			Set: func(c *sources.PrometheusConfig, v string) { c.ServerLabel = v }},
	},
	Build: func(c sources.PrometheusConfig, env Env) (weighter.Source, error) {
		return sources.NewPrometheus(c, env.Log)
	},
})
