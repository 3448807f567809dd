package sourcekind

import (
	"github.com/haproxy-weighter/haproxy-weighter/sources"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// graphite is `source: {graphite: {…}}`: a render target returning one
// series per server, an external metric that calibrates the fast signal.
var graphite = erase(Spec[sources.GraphiteConfig]{
	Name:      "graphite",
	Default:   sources.DefaultGraphiteConfig,
	Validate:  func(c *sources.GraphiteConfig) error { return c.Validate() },
	ServerMap: func(c *sources.GraphiteConfig) map[string]string { return c.ServerMap },
	Window: func(*sources.GraphiteConfig) Window {
		// A Graphite point is its bucket's aggregate, stamped at the bucket's start.
		return Window{FromStep: true, How: "the series' step"}
	},
	// The fast signal weighs both directions; the calibration maps them
	// onto whatever the target measures.
	FastBytes:  func(*sources.GraphiteConfig) (weighter.Bytes, bool) { return weighter.BytesBoth, true },
	Calibrates: true,
	Flags: []Flag[sources.GraphiteConfig]{
		{Name: "graphite-url", Key: "url", Usage: "Graphite base URL (load source)",
			Set: func(c *sources.GraphiteConfig, v string) { c.URL = v }},
		{Name: "target", Key: "target", Usage: "Graphite render target returning one series per server",
			Set: func(c *sources.GraphiteConfig, v string) { c.Target = v }},
	},
	Build: func(c sources.GraphiteConfig, env Env) (weighter.Source, error) {
		return sources.NewGraphite(c, env.Log)
	},
})
