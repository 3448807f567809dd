package config

import "fmt"

// Values of a backend's match key.
const (
	MatchName    = "name"
	MatchAddress = "address"
)

// MatchesAddress reports whether the backend's source names servers by
// address (`match: address`): with server-template or service discovery
// HAProxy names them srv1..srvN, while the metrics carry the host or IP.
func (b *Backend) MatchesAddress() bool { return b.Match == MatchAddress }

// validateMatch checks match: name or address, and address only where
// HAProxy has addresses to match and the source does not already use
// HAProxy's own names.
func (b *Backend) validateMatch() []*FieldError {
	switch b.Match {
	case "", MatchName:
		return nil
	case MatchAddress:
	default:
		return keyed(fmt.Errorf("match: want %s or %s, got %q", MatchName, MatchAddress, b.Match), "match")
	}
	switch {
	case b.IPVS != nil:
		return keyed(fmt.Errorf("match: %s is for HAProxy backends; an IPVS service maps names to addresses in ipvs.servers", MatchAddress), "match")
	case b.Source.NeedsHAProxy():
		return keyed(fmt.Errorf("match: %s needs a source that names servers by address; source.%s names them as HAProxy does", MatchAddress, b.Source.Kind()), "match")
	}
	return nil
}
