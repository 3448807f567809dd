package config

import (
	"errors"
	"fmt"
	"net/netip"

	"gopkg.in/yaml.v3"

	"github.com/haproxy-weighter/haproxy-weighter/internal/field"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// Pin is a backend's `pin:` block: placing its heavy clients on chosen
// servers through the backend's stick table (docs/pinning.md). Without the
// block an HAProxy backend that reads the fast signal pins when its HAProxy
// has the table (`stick-table type ip …` and `stick match src`), and goes on
// weighting without pins when it has none. `pin: false` (or `enabled:
// false`) turns it off; keys the block leaves out take weighter.DefaultPin.
type Pin struct {
	// Enabled: nil = on when the table is there (the default); false = off;
	// true = the same as nil, and says so louder when the table is missing.
	Enabled *bool `yaml:"enabled"`
	// Listeners are the addresses ("ip:port", ":port") HAProxy accepts the
	// backend's clients on: the client sockets measured. Empty: the binds of
	// the frontends that route to the backend alone, from HAProxy's
	// configuration file.
	Listeners          []string `yaml:"listeners"`
	weighter.PinPolicy `yaml:",inline"`
}

// UnmarshalYAML decodes the block over the recommended factors; a bare
// boolean (`pin: false`) is the block with enabled alone.
func (p *Pin) UnmarshalYAML(value *yaml.Node) error {
	*p = Pin{PinPolicy: weighter.DefaultPin()}
	if value.Kind == yaml.ScalarNode && value.Tag == "!!bool" {
		var on bool
		if err := value.Decode(&on); err != nil {
			return err
		}
		p.Enabled = &on
		return nil
	}
	type plain Pin // without this method, so that decoding does not come back here
	return value.Decode((*plain)(p))
}

// PinMode is whether and how a backend pins.
type PinMode int

// Pin modes.
const (
	// PinOff: the backend never pins (IPVS, no fast signal, or turned off).
	PinOff PinMode = iota
	// PinAuto: pins when its HAProxy has the table (the default).
	PinAuto
	// PinOn: pin: {enabled: true}: the same, a missing table said as a warning.
	PinOn
)

// PinSettings returns the backend's pinning: its mode, policy and the
// listeners configured (nil: from HAProxy's configuration file).
func (b *Backend) PinSettings() (mode PinMode, policy weighter.PinPolicy, listeners []string) {
	policy = weighter.DefaultPin()
	mode = PinAuto
	if b.Pin != nil {
		policy, listeners = b.Pin.PinPolicy, b.Pin.Listeners
		if b.Pin.Enabled != nil {
			mode = PinOff
			if *b.Pin.Enabled {
				mode = PinOn
			}
		}
	}
	if b.IPVS != nil || !b.UsesFastSignal() {
		// The clients are read from the kernel's socket table, beside the
		// fast signal; IPVS has no stick table.
		mode = PinOff
	}
	return mode, policy, listeners
}

// validatePin checks the pin block: that the backend can pin when told to,
// its listeners, its factors.
func (b *Backend) validatePin() []*FieldError {
	if b.Pin == nil {
		return nil
	}
	var problems []*FieldError
	if b.Pin.Enabled != nil && *b.Pin.Enabled {
		switch on, why := b.FastSignalState(); {
		case b.IPVS != nil:
			problems = append(problems, keyed(errors.New("pin: not possible on an IPVS service: "+
				"IPVS has no stick table (remove pin, or balance with HAProxy)"), "pin", "enabled")...)
		case !on:
			problems = append(problems, keyed(fmt.Errorf("pin: needs HAProxy's fast signal, "+
				"beside which the clients are read from the kernel's socket table, and it is off here (%s)", why), "pin", "enabled")...)
		}
	}
	for i, l := range b.Pin.Listeners {
		if _, err := ParseListener(l); err != nil {
			problems = append(problems, keyed(field.Errorf("listeners", "pin.listeners[%d]: %v", i, err), "pin")...)
		}
	}
	return append(problems, keyed(b.Pin.Validate(), "pin")...)
}

// ParseListener reads a pin listener: "ip:port", "[ipv6]:port" or ":port"
// (every address of the port).
func ParseListener(s string) (netip.AddrPort, error) {
	if len(s) > 0 && s[0] == ':' {
		s = "0.0.0.0" + s
	}
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("%q is not ip:port or :port", s)
	}
	if ap.Port() == 0 {
		return netip.AddrPort{}, fmt.Errorf("%q has no port", s)
	}
	return ap, nil
}
