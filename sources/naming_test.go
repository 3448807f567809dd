package sources

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNameRules(t *testing.T) {
	cases := []struct {
		name   string
		node   *int
		regex  string
		table  map[string]string
		series string
		want   string // "" = dropped
	}{
		{"plain label value", nil, "", nil, "node-1", "node-1"},
		{"empty label is not a server", nil, "", nil, "", ""},
		{"node index", intp(1), "", nil, "tcp.node-1.datapoints.received", "node-1"},
		{"node inside functions", intp(1), "", nil, "perSecond(tcp.node-1.datapoints.received)", "node-1"},
		{"node inside nested functions with args", intp(1), "", nil, "scale(perSecond(tcp.node-2.rx),10)", "node-2"},
		{"integral seed", intp(1), "", nil, "integral(tcp-service.node-x.datapoints.received)", "node-x"},
		{"negative node", intp(-2), "", nil, "loadavg.node-3.load1", "node-3"},
		{"graphite tags dropped", intp(1), "", nil, "tcp.node-4.rx;dc=eu", "node-4"},
		{"node out of range", intp(5), "", nil, "a.b", ""},
		{"regex capture", nil, `^([^:]+):\d+$`, nil, "node-3:9100", "node-3"},
		{"regex named group", nil, `(?P<dc>\w+)-(?P<server>node-\d+)`, nil, "eu-node-7", "node-7"},
		{"regex no match dropped", nil, `^(node-\d+)$`, nil, "carbon-relay", ""},
		{"map after node", intp(1), "", map[string]string{"node-1": "web1"}, "tcp.node-1.rx", "web1"},
		{"map miss dropped", nil, "", map[string]string{"node-1": "web1"}, "node-2", ""},
		{"regex then map", nil, `^([^:]+):`, map[string]string{"node-3": "web3"}, "node-3:9100", "web3"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := newNameRules(c.node, c.regex, c.table)
			require.NoError(t, err)
			got, ok := r.server(c.series)
			assert.Equal(t, c.want != "", ok)
			assert.Equal(t, c.want, got)
		})
	}
}

func TestNameRulesRejectBadRegex(t *testing.T) {
	_, err := newNameRules(nil, `node-\d+`, nil)
	assert.EqualError(t, err, `server_regex: "node-\\d+" has no capture group`)
	_, err = newNameRules(nil, "", map[string]string{"node-1": ""})
	assert.EqualError(t, err, `server_map: "node-1" maps to an empty name`)
	_, err = newNameRules(nil, `(`, nil)
	assert.ErrorContains(t, err, "server_regex: ")
}
