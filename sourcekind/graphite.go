package sourcekind

import (
	"github.com/haproxy-weighter/haproxy-weighter/sources"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

func init() {
	Register(Spec[sources.GraphiteConfig]{
		Name:     "graphite",
		Rank:     20,
		Default:  sources.DefaultGraphiteConfig,
		Validate: sources.GraphiteConfig.Validate,
		New: func(c sources.GraphiteConfig, env Env) (weighter.Source, error) {
			return sources.NewGraphite(c, env.Log)
		},
		ServerMap: func(c sources.GraphiteConfig) map[string]string { return c.ServerMap },
		// A Graphite point is its bucket's aggregate, stamped at the bucket's start.
		Window: func(sources.GraphiteConfig) Window { return Window{FromStep: true, How: "the series' step"} },
		Flags: []Flag[sources.GraphiteConfig]{
			{Name: "graphite-url", Key: "url", Usage: "Graphite base URL (load source)",
				Set: func(c *sources.GraphiteConfig, v string) { c.URL = v }},
			{Name: "target", Key: "target", Usage: "Graphite render target returning one series per server",
				Set: func(c *sources.GraphiteConfig, v string) { c.Target = v }},
		},
	})
}
