//go:build ipvskernel

package kerneltest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/cloudflare/ipvs"
	"github.com/cloudflare/ipvs/netmask"
	"golang.org/x/sys/unix"

	"github.com/haproxy-weighter/haproxy-weighter/lvs"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// The README's example: a UDP service with three DirectRoute real servers.
var (
	vip      = "udp://10.0.0.1:2003"
	service  = ipvs.Service{Address: netip.MustParseAddr("10.0.0.1"), Port: 2003, Protocol: ipvs.UDP, Family: ipvs.INET}
	mapping  = map[string]string{"node-1": "10.0.2.1:2003", "node-2": "10.0.2.2:2003", "node-3": "10.0.2.3"}
	realAddr = map[string]string{"node-1": "10.0.2.1:2003", "node-2": "10.0.2.2:2003", "node-3": "10.0.2.3:2003"}
	loads    = map[string]float64{"node-1": 10, "node-2": 20, "node-3": 40}
)

const startWeight = 100

var logger = slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{Level: slog.LevelDebug}))

// checkWithoutIPVS: on a real kernel without ip_vs, New must say why.
func checkWithoutIPVS() error {
	_, err := lvs.New(lvs.Config{Service: vip}, nil, logger)
	if !errors.Is(err, lvs.ErrNoKernelSupport) {
		return fmt.Errorf("lvs.New = %v, want ErrNoKernelSupport", err)
	}
	fmt.Printf("guest: without ip_vs: %v\n", err)
	return nil
}

func checkWriter() error {
	nl, err := ipvs.New()
	if err != nil {
		return fmt.Errorf("netlink: %w", err)
	}
	if err := createService(nl); err != nil {
		return err
	}
	fds, err := openFDs()
	if err != nil {
		return err
	}
	if _, err := lvs.New(lvs.Config{Service: "udp://10.0.0.1:2004"}, nil, logger); err == nil ||
		!strings.Contains(err.Error(), "not found in the kernel") {
		return fmt.Errorf("lvs.New on a missing service = %v, want \"not found in the kernel\"", err)
	}
	// A daemon retrying a missing service at every reload must not leak the
	// netlink socket it opened for the check.
	if after, err := openFDs(); err != nil || after != fds {
		return fmt.Errorf("open fds: %d before a failed lvs.New, %d after (%v)", fds, after, err)
	}
	w, err := lvs.New(lvs.Config{Service: vip, Servers: mapping}, nil, logger)
	if err != nil {
		return err
	}
	defer w.Close()
	if err := checkServers(w, map[string]int{"node-1": startWeight, "node-2": startWeight, "node-3": startWeight}); err != nil {
		return err
	}
	want, err := runCycles(w, nl)
	if err != nil {
		return err
	}
	if err := checkKernel(nl, want); err != nil {
		return err
	}
	if err := checkQuiesce(w, nl, want); err != nil {
		return err
	}
	if err := checkUDPSessions(w, nl); err != nil {
		return err
	}
	if err := checkVanishedDestination(nl); err != nil {
		return err
	}
	if err := checkFWMark(nl); err != nil {
		return err
	}
	if err := checkIPv6(nl); err != nil {
		return err
	}
	return checkUnloaded(w, nl)
}

// checkUnloaded removes the services and unloads ip_vs under a running
// Service: its next read must say the kernel lost IPVS support. Once ip_vs is
// back (under a new generic netlink family id) and the service recreated,
// the same Service must work again, without a restart.
func checkUnloaded(w *lvs.Service, nl ipvs.Client) error {
	svcs, err := nl.Services()
	if err != nil {
		return fmt.Errorf("list services: %w", err)
	}
	for _, svc := range svcs {
		if err := nl.RemoveService(svc.Service); err != nil {
			return fmt.Errorf("remove service: %w", err)
		}
	}
	for _, m := range []string{"ip_vs_wrr", "ip_vs"} {
		if err := unix.DeleteModule(m, unix.O_NONBLOCK); err != nil {
			return fmt.Errorf("rmmod %s: %w", m, err)
		}
	}
	_, err = w.Servers(context.Background())
	fmt.Printf("guest: read after ip_vs was unloaded: %v\n", err)
	if !errors.Is(err, lvs.ErrNoKernelSupport) {
		return fmt.Errorf("read after ip_vs was unloaded = %v, want ErrNoKernelSupport", err)
	}
	if err := loadModules(guestModules); err != nil {
		return err
	}
	nl2, err := ipvs.New()
	if err != nil {
		return fmt.Errorf("netlink after ip_vs was loaded again: %w", err)
	}
	defer nl2.(io.Closer).Close()
	if err := createService(nl2); err != nil {
		return fmt.Errorf("after ip_vs was loaded again: %w", err)
	}
	if err := checkServers(w, map[string]int{"node-1": startWeight, "node-2": startWeight, "node-3": startWeight}); err != nil {
		return fmt.Errorf("after ip_vs was loaded again: %w", err)
	}
	fmt.Println("guest: ip_vs loaded again, service recreated: read ok")
	return nil
}

func createService(nl ipvs.Client) error {
	svc := service
	svc.Scheduler, svc.Netmask = "wrr", netmask.MaskFrom(32, 32)
	if err := nl.CreateService(svc); err != nil {
		return fmt.Errorf("create service: %w", err)
	}
	for _, name := range []string{"node-1", "node-2", "node-3"} {
		if err := nl.CreateDestination(service, realServer(name, startWeight)); err != nil {
			return fmt.Errorf("create destination %s: %w", name, err)
		}
	}
	return nil
}

// realServer is a DirectRoute destination with thresholds set, so any field
// lost by a write shows.
func realServer(name string, weight int) ipvs.Destination {
	ap := netip.MustParseAddrPort(realAddr[name])
	return ipvs.Destination{Address: ap.Addr(), Port: ap.Port(), Family: ipvs.INET,
		FwdMethod: ipvs.DirectRoute, Weight: uint32(weight), UpperThreshold: 900, LowerThreshold: 10}
}

func checkServers(w *lvs.Service, want map[string]int) error {
	got, err := w.Servers(context.Background())
	if err != nil {
		return err
	}
	if len(got) != len(want) {
		return fmt.Errorf("Servers = %+v, want %d servers", got, len(want))
	}
	for _, s := range got {
		if wt, ok := want[s.Name]; !ok || s.Weight != wt || s.Address != realAddr[s.Name] {
			return fmt.Errorf("Servers: %+v, want weight %d at %s", s, want[s.Name], realAddr[s.Name])
		}
	}
	return nil
}

// runCycles runs a dry-run cycle (nothing may change) and a real one, and
// returns the weights the real one planned.
func runCycles(w *lvs.Service, nl ipvs.Client) (map[string]int, error) {
	ctrl, err := weighter.NewController(weighter.DefaultPolicy())
	if err != nil {
		return nil, err
	}
	now := time.Now()
	b := &weighter.Weigher{Name: "ipvs-udp", Source: staticSource(now), Target: w, Controller: ctrl}
	dry := weighter.RunCycle(context.Background(), b, now, false)
	if dry.Result != weighter.ResultOK {
		return nil, fmt.Errorf("dry-run cycle: %s: %v", dry.Result, dry.Err)
	}
	unchanged := map[string]int{"node-1": startWeight, "node-2": startWeight, "node-3": startWeight}
	if err := checkKernel(nl, unchanged); err != nil {
		return nil, fmt.Errorf("after the dry run: %w", err)
	}
	c := weighter.RunCycle(context.Background(), b, now, true)
	if c.Result != weighter.ResultOK || len(c.Written) == 0 {
		return nil, fmt.Errorf("cycle: %s, %d written, plan %+v: %v", c.Result, len(c.Written), c.Plan, c.Err)
	}
	fmt.Printf("guest: cycle (read, plan, %d netlink writes) took %v\n", len(c.Written), c.Duration)
	want := map[string]int{}
	for _, sp := range c.Plan.Servers {
		want[sp.Server] = sp.Current
		if sp.Action == weighter.ActionSet {
			want[sp.Server] = sp.New
		}
		fmt.Printf("guest: plan %s load %.0f: %d -> %d (%s)\n", sp.Server, sp.Load, sp.Current, want[sp.Server], sp.Action)
	}
	return want, nil
}

type staticSource time.Time

func (s staticSource) Fetch(context.Context, []weighter.ServerState) (weighter.Loads, error) {
	out := weighter.Loads{}
	for name, v := range loads {
		out[name] = weighter.Series{{Time: time.Time(s), Value: v}}
	}
	return out, nil
}

// checkKernel compares the kernel's destinations with want, by netlink and by
// ipvsadm: weights as planned, every other field as created.
func checkKernel(nl ipvs.Client, want map[string]int) error {
	dests, err := nl.Destinations(service)
	if err != nil {
		return fmt.Errorf("read destinations: %w", err)
	}
	if len(dests) != len(want) {
		return fmt.Errorf("kernel has %d destinations, want %d", len(dests), len(want))
	}
	for _, d := range dests {
		name := nameOf(d.Address, d.Port)
		if exp := realServer(name, want[name]); d.Destination != exp {
			return fmt.Errorf("netlink: destination %s = %+v, want %+v", name, d.Destination, exp)
		}
	}
	return checkIPVSADM(want)
}

func nameOf(a netip.Addr, port uint16) string {
	for name, addr := range realAddr {
		if addr == netip.AddrPortFrom(a, port).String() {
			return name
		}
	}
	return "unknown " + a.String()
}

// checkIPVSADM parses "  -> 10.0.2.1:2003   Route   37   0   0" lines.
func checkIPVSADM(want map[string]int) error {
	cmd := exec.Command(guestIPVSADM, "-Ln")
	cmd.Env = []string{"LD_LIBRARY_PATH=" + guestLibs}
	out, err := cmd.CombinedOutput()
	fmt.Printf("guest: ipvsadm -Ln:\n%s", out)
	if err != nil {
		return fmt.Errorf("ipvsadm -Ln: %w", err)
	}
	seen, services := 0, 0
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		// ipvsadm 1.31 prints a UDP service as "UDP  %u.%u.%u.%u:2003 wrr"
		// (a known formatting bug), so only protocol, port and scheduler count.
		if len(f) >= 3 && f[0] == "UDP" {
			if !strings.HasSuffix(f[1], ":2003") || f[2] != "wrr" {
				return fmt.Errorf("ipvsadm: service line %q, want UDP …:2003 wrr", line)
			}
			services++
		}
		if len(f) < 4 || f[0] != "->" || f[1] == "RemoteAddress:Port" {
			continue
		}
		ap, err := netip.ParseAddrPort(f[1])
		if err != nil {
			return fmt.Errorf("ipvsadm: %q: %w", line, err)
		}
		name := nameOf(ap.Addr(), ap.Port())
		wt, _ := strconv.Atoi(f[3])
		if f[2] != "Route" || wt != want[name] {
			return fmt.Errorf("ipvsadm: %q, want Route with weight %d", line, want[name])
		}
		seen++
	}
	if services != 1 || seen != len(want) {
		return fmt.Errorf("ipvsadm listed %d services and %d real servers, want 1 and %d", services, seen, len(want))
	}
	return nil
}

// checkQuiesce sets weight 0 (the drain feature's quiesce) on one server.
func checkQuiesce(w *lvs.Service, nl ipvs.Client, want map[string]int) error {
	if err := w.SetWeights(context.Background(), []weighter.Change{{Server: "node-3", Weight: 0}}); err != nil {
		return fmt.Errorf("quiesce node-3: %w", err)
	}
	want["node-3"] = 0
	if err := checkKernel(nl, want); err != nil {
		return fmt.Errorf("after quiesce: %w", err)
	}
	return checkServers(w, want)
}

// checkUDPSessions sends datagrams from udpFlows source ports to the VIP,
// bound to lo as kube-proxy binds its service addresses, so IPVS schedules
// each as a connection (forwarding then finds no route to the real servers
// and drops the packet; the connection entry stays for the UDP timeout).
// IPVS never counts a UDP connection active, so lvs must report the
// inactive ones as the servers' Sessions.
func checkUDPSessions(w *lvs.Service, nl ipvs.Client) error {
	const udpFlows = 6
	if err := addHostAddr("lo:1", service.Address); err != nil {
		return err
	}
	for i := 0; i < udpFlows; i++ {
		c, err := net.Dial("udp", netip.AddrPortFrom(service.Address, service.Port).String())
		if err != nil {
			return fmt.Errorf("udp flow %d: %w", i, err)
		}
		_, err = c.Write([]byte("load 1\n"))
		c.Close()
		if err != nil {
			return fmt.Errorf("udp flow %d: %w", i, err)
		}
	}
	dests, err := nl.Destinations(service)
	if err != nil {
		return fmt.Errorf("read destinations: %w", err)
	}
	var active, inactive uint32
	for _, d := range dests {
		active, inactive = active+d.ActiveConnections, inactive+d.InactiveConnections
	}
	fmt.Printf("guest: %d UDP flows: kernel counts %d active, %d inactive\n", udpFlows, active, inactive)
	servers, err := w.Servers(context.Background())
	if err != nil {
		return err
	}
	sessions := 0
	for _, s := range servers {
		sessions += s.Sessions
	}
	if active+inactive != udpFlows || sessions != udpFlows {
		return fmt.Errorf("%d UDP flows: kernel counts %d active + %d inactive, lvs reports %d sessions", udpFlows, active, inactive, sessions)
	}
	return checkFastCount(w, udpFlows)
}

// checkFastCount reads the fast count twice: with the flows still in the
// kernel's table, the second read's mean connections sum to them, and the
// connection-seconds grew.
func checkFastCount(w *lvs.Service, flows int) error {
	first, err := w.ReadLocal(context.Background(), nil)
	if err != nil {
		return fmt.Errorf("fast count: %w", err)
	}
	time.Sleep(20 * time.Millisecond)
	got, err := w.ReadLocal(context.Background(), nil)
	if err != nil {
		return fmt.Errorf("fast count: %w", err)
	}
	var mean, grew float64
	for name, c := range got.Servers {
		if c.Reset || c.Rate != c.Sessions {
			return fmt.Errorf("fast count of %s: %+v", name, c)
		}
		mean += c.Sessions
		grew += c.Bytes - first.Servers[name].Bytes
	}
	fmt.Printf("guest: fast count: %.0f connections, %.3f connection-seconds in %s\n", mean, grew, got.At.Sub(got.Since))
	if mean != float64(flows) || !(grew > 0) {
		return fmt.Errorf("fast count: %g connections (want %d), connection-seconds grew by %g", mean, flows, grew)
	}
	return nil
}

// addHostAddr gives the interface alias a /32 address (ifconfig's ioctls).
func addHostAddr(alias string, a netip.Addr) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	defer unix.Close(fd)
	for _, op := range []struct {
		req  uint
		addr netip.Addr
	}{{unix.SIOCSIFADDR, a}, {unix.SIOCSIFNETMASK, netip.MustParseAddr("255.255.255.255")}} {
		ifr, err := unix.NewIfreq(alias)
		if err != nil {
			return err
		}
		b := op.addr.As4()
		if err := ifr.SetInet4Addr(b[:]); err != nil {
			return err
		}
		if err := unix.IoctlIfreq(fd, op.req, ifr); err != nil {
			return fmt.Errorf("%s %s: %w", alias, op.addr, err)
		}
	}
	return nil
}

// checkVanishedDestination pins the kernel's answer that lvs relies on when a
// destination is removed between its read and its write: "set destination"
// fails with ENOENT (os.ErrNotExist) and does not create it.
func checkVanishedDestination(nl ipvs.Client) error {
	gone := ipvs.Destination{Address: netip.MustParseAddr("10.0.2.9"), Port: 2003, Family: ipvs.INET,
		FwdMethod: ipvs.DirectRoute, Weight: 5}
	err := nl.UpdateDestination(service, gone)
	if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("update of a missing destination = %v, want ENOENT", err)
	}
	fmt.Printf("guest: update of a missing destination: %v\n", err)
	dests, err := nl.Destinations(service)
	if err != nil {
		return fmt.Errorf("read destinations: %w", err)
	}
	if len(dests) != len(realAddr) {
		return fmt.Errorf("after the update of a missing destination the kernel has %d destinations, want %d", len(dests), len(realAddr))
	}
	return nil
}

// openFDs counts the process's open file descriptors.
func openFDs() (int, error) {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0, fmt.Errorf("count open fds: %w", err)
	}
	return len(ents), nil
}

// checkFWMark drives a firewall-mark service whose real servers have port 0
// (the packet's port is kept), as ipvsadm -f creates them: a bare-ip mapping
// names one, another is named ip:0. The third is a GUE tunnel, so the write
// must keep the tunnel type, port and flags as well as DirectRoute.
func checkFWMark(nl ipvs.Client) error {
	svc := ipvs.Service{FWMark: 7, Family: ipvs.INET, Scheduler: "wrr", Netmask: netmask.MaskFrom(32, 32)}
	if err := nl.CreateService(svc); err != nil {
		return fmt.Errorf("create fwmark service: %w", err)
	}
	created := map[string]ipvs.Destination{}
	for _, a := range []string{"10.0.3.1", "10.0.3.2", "10.0.3.3"} {
		d := ipvs.Destination{Address: netip.MustParseAddr(a), Family: ipvs.INET, FwdMethod: ipvs.DirectRoute,
			Weight: startWeight, UpperThreshold: 900, LowerThreshold: 10}
		if a == "10.0.3.3" {
			d.FwdMethod, d.TunnelType, d.TunnelPort, d.TunnelFlags = ipvs.Tunnel, ipvs.GUE, 6080, ipvs.TunnelEncapChecksum
		}
		if err := nl.CreateDestination(svc, d); err != nil {
			return fmt.Errorf("create fwmark destination %s: %w", a, err)
		}
		created[a] = d
	}
	w, err := lvs.New(lvs.Config{Service: "fwmark:7", Servers: map[string]string{"fw-1": "10.0.3.1", "fw-3": "10.0.3.3"}}, nil, logger)
	if err != nil {
		return err
	}
	defer w.Close()
	got, err := w.Servers(context.Background())
	if err != nil {
		return err
	}
	if len(got) != 3 || got[0].Name != "10.0.3.2:0" || got[1].Name != "fw-1" || got[2].Name != "fw-3" || got[1].Weight != startWeight {
		return fmt.Errorf("fwmark:7 Servers = %+v, want 10.0.3.2:0, fw-1 and fw-3 at %d", got, startWeight)
	}
	if err := w.SetWeights(context.Background(), []weighter.Change{{Server: "fw-1", Weight: 42}, {Server: "fw-3", Weight: 43}}); err != nil {
		return fmt.Errorf("fwmark:7 set weights: %w", err)
	}
	dests, err := nl.Destinations(svc)
	if err != nil {
		return fmt.Errorf("read fwmark destinations: %w", err)
	}
	for _, d := range dests {
		want := created[d.Address.String()]
		switch d.Address.String() {
		case "10.0.3.1":
			want.Weight = 42
		case "10.0.3.3":
			want.Weight = 43
		}
		if d.Destination != want {
			return fmt.Errorf("fwmark:7: destination %s = %+v, want %+v", d.Address, d.Destination, want)
		}
	}
	fmt.Printf("guest: fwmark:7: %d real servers written, DirectRoute and GUE tunnel settings kept\n", len(dests))
	return nil
}

// checkIPv6 drives an IPv6 TCP service: addresses in brackets, both in the
// mapping and in the names of unmapped real servers.
func checkIPv6(nl ipvs.Client) error {
	svc := ipvs.Service{Address: netip.MustParseAddr("2001:db8::1"), Port: 80, Protocol: ipvs.TCP, Family: ipvs.INET6,
		Scheduler: "wrr", Netmask: netmask.MaskFrom(128, 128)}
	if err := nl.CreateService(svc); err != nil {
		return fmt.Errorf("create ipv6 service: %w", err)
	}
	for _, a := range []string{"[2001:db8::a]:80", "[2001:db8::b]:80"} {
		ap := netip.MustParseAddrPort(a)
		d := ipvs.Destination{Address: ap.Addr(), Port: ap.Port(), Family: ipvs.INET6, FwdMethod: ipvs.DirectRoute, Weight: startWeight}
		if err := nl.CreateDestination(svc, d); err != nil {
			return fmt.Errorf("create ipv6 destination %s: %w", a, err)
		}
	}
	w, err := lvs.New(lvs.Config{Service: "tcp://[2001:db8::1]:80", Servers: map[string]string{"v6-a": "[2001:db8::a]:80"}}, nil, logger)
	if err != nil {
		return err
	}
	defer w.Close()
	if err := w.SetWeights(context.Background(), []weighter.Change{{Server: "v6-a", Weight: 7}, {Server: "[2001:db8::b]:80", Weight: 9}}); err != nil {
		return fmt.Errorf("ipv6 set weights: %w", err)
	}
	got, err := w.Servers(context.Background())
	if err != nil {
		return err
	}
	if len(got) != 2 || got[0].Name != "[2001:db8::b]:80" || got[0].Weight != 9 || got[1].Name != "v6-a" || got[1].Weight != 7 ||
		got[1].Address != "[2001:db8::a]:80" {
		return fmt.Errorf("ipv6 Servers = %+v, want [2001:db8::b]:80 at 9 and v6-a at 7", got)
	}
	fmt.Printf("guest: tcp://[2001:db8::1]:80: %+v\n", got)
	return nil
}
