package lvs

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/cloudflare/ipvs"
)

// conn is the part of the IPVS netlink API the writer uses. The real one is
// github.com/cloudflare/ipvs; tests use a fake that records calls, so the
// mapping and read-modify-write logic runs without a kernel.
type conn interface {
	Service(ipvs.Service) (ipvs.ServiceExtended, error)
	Destinations(ipvs.Service) ([]ipvs.DestinationExtended, error)
	UpdateDestination(ipvs.Service, ipvs.Destination) error
	Close() error
}

// ErrNoKernelSupport means the running kernel has no IP Virtual Server
// support: the ip_vs module is not loaded (or not built).
var ErrNoKernelSupport = errors.New("kernel has no IP Virtual Server support (ip_vs module not loaded?)")

// dial opens the real netlink client.
func dial() (conn, error) {
	c, err := ipvs.New()
	if err != nil {
		return nil, dialError(err)
	}
	closer, ok := c.(io.Closer)
	if !ok {
		// Every Linux client is a Closer; anything else is a library change we must notice.
		return nil, fmt.Errorf("ipvs: client %T cannot be closed", c)
	}
	return netlinkConn{Client: c, Closer: closer}, nil
}

// dialError names the cause of a failed open. The generic netlink family
// "IPVS" exists only while ip_vs is loaded; without it the family lookup
// fails with ENOENT, which the library reports as "netlink receive: no such
// file or directory" — true, but useless to an operator.
func dialError(err error) error {
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("ipvs: %w: %w", ErrNoKernelSupport, err)
	}
	return fmt.Errorf("ipvs: open netlink: %w", err)
}

// netlinkConn adapts ipvs.Client to conn.
type netlinkConn struct {
	ipvs.Client
	io.Closer
}

// Destinations treats "no destinations" (the library's os.ErrNotExist for an
// empty dump) as an empty list: a service may legitimately have none. Only
// the bare sentinel is: a netlink ENOENT (ip_vs unloaded) also matches
// errors.Is(err, os.ErrNotExist), and is an error.
func (c netlinkConn) Destinations(svc ipvs.Service) ([]ipvs.DestinationExtended, error) {
	d, err := c.Client.Destinations(svc)
	if err == os.ErrNotExist {
		return nil, nil
	}
	return d, err
}
