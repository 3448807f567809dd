package sources

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestPromQLWindow(t *testing.T) {
	for q, want := range map[string]time.Duration{
		"rate(datapoints_received_total[1m])":                 time.Minute,
		"rate(x[15s]) / on(server) avg_over_time(y[30s])":     30 * time.Second,
		"max_over_time(rate(x[30s])[5m:15s])":                 5 * time.Minute,
		`sum by (server) (rate(x{server=~"s[0-9]+"}[1h30m]))`: 90 * time.Minute,
		`rate(x{path="a]b"}[20s])`:                            20 * time.Second,
		"rate(x[ 2m ]) offset 1m":                             2 * time.Minute,
		"node_load1":                                          0,
		"job:rate1m":                                          0,
		"rate(x[$__rate_interval])":                           0,
		`label_replace(rate(x[1m]), "server", "$1", "instance", "([^:]+):.*")`: time.Minute,
	} {
		got, ok := PromQLWindow(q)
		assert.Equal(t, want, got, q)
		assert.Equal(t, want > 0, ok, q)
	}
}
