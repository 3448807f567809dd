package config

import (
	"errors"
	"fmt"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// Shed is a backend's `shed:` block: closing the heaviest long-lived
// session of a server that stays hot (docs/shedding.md). A backend without
// the block never sheds; keys the block leaves out take weighter.DefaultShed.
type Shed struct {
	weighter.ShedPolicy `yaml:",inline"`
}

// UnmarshalYAML decodes the block over the recommended factors.
func (s *Shed) UnmarshalYAML(unmarshal func(any) error) error {
	*s = Shed{ShedPolicy: weighter.DefaultShed()}
	type plain Shed // without this method, so that unmarshal does not come back here
	return unmarshal((*plain)(s))
}

// ShedPolicy returns the backend's shedding policy; ok is false when the
// backend does not shed.
func (b *Backend) ShedPolicy() (p weighter.ShedPolicy, ok bool) {
	if b.Shed == nil {
		return weighter.ShedPolicy{}, false
	}
	return b.Shed.ShedPolicy, true
}

// validateShed checks the shed block: its factors, and that the backend can
// shed at all: an HAProxy backend that reads the fast signal, whose `show
// sess all` dumps give each session's rate.
func (b *Backend) validateShed() []*FieldError {
	if b.Shed == nil {
		return nil
	}
	var problems []*FieldError
	switch on, why := b.FastSignalState(); {
	case b.IPVS != nil:
		problems = append(problems, keyed(errors.New("shed: not possible on an IPVS service: "+
			"IPVS neither measures nor closes single connections (remove shed, or balance with HAProxy)"), "shed")...)
	case !on:
		problems = append(problems, keyed(fmt.Errorf("shed: needs HAProxy's fast signal, "+
			"which gives each session's rate, and it is off here (%s)", why), "shed")...)
	}
	return append(problems, keyed(b.Shed.Validate(), "shed")...)
}
