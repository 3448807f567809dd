package sourcekind

import "strings"

// registered lists every kind, once, in the order messages name them
// ("prometheus, graphite, haproxy") and their flags are listed. A new kind
// is a file of its own and a line here.
var registered = []Kind{
	prometheus,
	graphite,
	haproxyStats,
}

// All returns every kind, in the registry's order.
func All() []Kind {
	out := make([]Kind, len(registered))
	copy(out, registered)
	return out
}

// Lookup returns the kind named name.
func Lookup(name string) (Kind, bool) {
	for _, k := range registered {
		if k.Name() == name {
			return k, true
		}
	}
	return nil, false
}

// Names lists the kinds' names for a message: "prometheus, graphite, haproxy".
func Names(kinds []Kind) string {
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = k.Name()
	}
	return strings.Join(names, ", ")
}
