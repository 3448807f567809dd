package config

import (
	"fmt"

	"gopkg.in/yaml.v3"

	promconfig "github.com/prometheus/common/config"
)

// promChecked are the keys of Prometheus' HTTP settings whose type checks
// itself while it is decoded (its UnmarshalYAML calls Validate): its error
// comes out of yaml.v3 without a line. Each key's decoder.
var promChecked = map[string]func(*yaml.Node) error{
	"tls_config": func(n *yaml.Node) error { return n.Decode(&promconfig.TLSConfig{}) },
	"oauth2":     func(n *yaml.Node) error { return n.Decode(&promconfig.OAuth2{}) },
}

// promCheckLine finds the tls_config or oauth2 block whose decoding fails
// with err's message and returns err at its line, after its key (the
// innermost block: an oauth2's tls_config fails its oauth2 too); nil when
// none does. Their messages name keys, not values.
func promCheckLine(root *yaml.Node, err error) error {
	var found error
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		for i, c := range n.Content {
			if n.Kind == yaml.MappingNode && i%2 == 0 && i+1 < len(n.Content) {
				if decode, ok := promChecked[c.Value]; ok {
					if e := decode(n.Content[i+1]); e != nil && e.Error() == err.Error() {
						found = &FieldError{Line: c.Line, Err: fmt.Errorf("%s: %s", c.Value, e)}
					}
				}
			}
			walk(c)
		}
	}
	walk(root)
	return found
}
