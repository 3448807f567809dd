package lvs

import (
	"fmt"
	"net/netip"
	"syscall"

	"github.com/cloudflare/ipvs"
)

// fakeConn behaves like the kernel for the calls the writer makes: it keeps
// one service and its destinations, and UpdateDestination replaces every
// field of the stored destination, as IP_VS_CMD_SET_DEST does. It records
// each update.
type fakeConn struct {
	svc     ipvs.Service
	dests   []ipvs.Destination
	updates []ipvs.Destination
	failOn  map[netip.Addr]error // UpdateDestination fails for these addresses
	closed  bool
	// active and inactive are the connection counts of every destination.
	active, inactive uint32
	// perDest, when it has a destination's address, is its active count instead.
	perDest map[netip.Addr]uint32
	// serviceErr, when set, is what Service answers (ip_vs unloaded: ENOENT).
	serviceErr error
	// beforeUpdate, when set, runs at the start of each UpdateDestination:
	// another tool changing the service between the read and the write.
	beforeUpdate func(f *fakeConn)
}

func (f *fakeConn) Service(svc ipvs.Service) (ipvs.ServiceExtended, error) {
	if f.serviceErr != nil {
		return ipvs.ServiceExtended{}, f.serviceErr
	}
	if svc != f.svc {
		return ipvs.ServiceExtended{}, fmt.Errorf("netlink receive: %w", syscall.ESRCH)
	}
	return ipvs.ServiceExtended{Service: f.svc}, nil
}

func (f *fakeConn) Destinations(svc ipvs.Service) ([]ipvs.DestinationExtended, error) {
	if svc != f.svc {
		return nil, nil // the kernel dumps nothing for a missing service
	}
	out := make([]ipvs.DestinationExtended, len(f.dests))
	for i, d := range f.dests {
		active := f.active
		if n, ok := f.perDest[d.Address]; ok {
			active = n
		}
		out[i] = ipvs.DestinationExtended{Destination: d, ActiveConnections: active, InactiveConnections: f.inactive}
	}
	return out, nil
}

func (f *fakeConn) UpdateDestination(svc ipvs.Service, d ipvs.Destination) error {
	if f.beforeUpdate != nil {
		f.beforeUpdate(f)
	}
	f.updates = append(f.updates, d)
	if err := f.failOn[d.Address]; err != nil {
		return err
	}
	if svc != f.svc {
		return fmt.Errorf("netlink receive: %w", syscall.ESRCH)
	}
	for i, old := range f.dests {
		if old.Address == d.Address && old.Port == d.Port {
			f.dests[i] = d
			return nil
		}
	}
	return fmt.Errorf("netlink receive: %w", syscall.ENOENT)
}

func (f *fakeConn) Close() error {
	f.closed = true
	return nil
}

// dr returns a DirectRoute destination with non-default thresholds, so a
// write that loses any field shows.
func dr(addr string, weight uint32) ipvs.Destination {
	ap := netip.MustParseAddrPort(addr)
	return ipvs.Destination{
		Address: ap.Addr(), Port: ap.Port(), Family: family(ap.Addr()),
		FwdMethod: ipvs.DirectRoute, Weight: weight, UpperThreshold: 900, LowerThreshold: 100,
	}
}

// udpService is the README's example service, udp://10.0.0.1:2003.
var udpService = ipvs.Service{
	Address: netip.MustParseAddr("10.0.0.1"), Port: 2003, Protocol: ipvs.UDP, Family: ipvs.INET,
}

func newFake(dests ...ipvs.Destination) *fakeConn {
	return &fakeConn{svc: udpService, dests: dests, active: 7}
}
