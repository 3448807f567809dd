// Package duration is the type of the durations in the configuration.
package duration

import (
	"fmt"
	"time"

	"gopkg.in/yaml.v3"
)

// Duration is a time.Duration that YAML gives as time.ParseDuration reads
// it ("10s", "1m30s", "250ms") or as a bare 0: "0 = off" is how the README
// and every reader put it, and 0 is the one number whose unit does not
// matter. Other numbers stay errors (is 10 seconds or minutes?), and so
// does an anchored 0 (&z 0), whose aliases may stand where an integer is
// wanted. In JSON it is nanoseconds, as a time.Duration.
type Duration time.Duration

func (d Duration) String() string { return time.Duration(d).String() }

// UnmarshalYAML reads a duration. A value that is none is reported as
// yaml.v3 reports any value that does not fit its type, a *yaml.TypeError,
// so that decoding goes on and every such problem is reported at once (and
// worded, without its value, with the others).
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		switch tag := n.ShortTag(); {
		case tag == "!!int" && n.Value == "0" && n.Style == 0 && n.Anchor == "":
			*d = 0
			return nil
		case tag == "!!str":
			if v, err := time.ParseDuration(n.Value); err == nil {
				*d = Duration(v)
				return nil
			}
		}
	}
	value := ""
	if n.Kind == yaml.ScalarNode {
		value = n.Value
		if len(value) > 10 {
			value = value[:7] + "..."
		}
		value = " `" + value + "`"
	}
	return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: cannot unmarshal %s%s into time.Duration", n.Line, n.ShortTag(), value)}}
}
