package haproxy

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
	"golang.org/x/sys/unix"
)

// What the kernel's socket table reader (package sockdiag) needs of HAProxy:
// the servers' addresses, to find HAProxy's connections to them, and
// HAProxy's processes, to tell HAProxy's sockets from other processes' and
// to see the old workers' connections after a reload.

// ServerAddrs returns the address of each of servers, as a Servers call
// read them (`show servers state`'s srv_addr and srv_port): the cycle's
// read, which the fast readers are handed, so this costs no round trip.
// A server without an IP address is left out: "-" (a unix@ or abns@
// server), 0.0.0.0 or :: (one waiting for DNS or set with `init-addr
// none`). The socket table cannot show its connections, and the reader
// reports it unread (missing data), never idle.
// A port 0 is kept: HAProxy then connects to the client's destination port,
// and the reader matches the address on any port.
func ServerAddrs(servers []weighter.ServerState) map[string]netip.AddrPort {
	out := make(map[string]netip.AddrPort, len(servers))
	for _, s := range servers {
		if ap, ok := serverAddr(s.Address); ok {
			out[s.Name] = ap
		}
	}
	return out
}

// serverAddr parses a server's "ip:port" (IPv6 in brackets, as
// net.JoinHostPort writes it); ok is false for one without an address.
func serverAddr(s string) (netip.AddrPort, bool) {
	ap, err := netip.ParseAddrPort(s)
	if err != nil || ap.Addr().IsUnspecified() {
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), true
}

// ServerSessions returns the open sessions (`show stat` scur) of each of
// servers, as a Servers call read them.
func ServerSessions(servers []weighter.ServerState) map[string]int {
	out := make(map[string]int, len(servers))
	for _, s := range servers {
		out[s.Name] = s.Sessions
	}
	return out
}

// Processes returns the pids of HAProxy's processes that hold connections:
// through the master CLI (Config.Master) every worker `show proc` lists,
// the current one and the old ones still serving their connections after a
// reload; through a worker's stats socket, that worker (`show info`'s Pid),
// whose old workers the caller may find as its master's other children.
// The first pid is the current worker.
func (c *Client) Processes(ctx context.Context) ([]int, error) {
	if c.cfg.Master {
		out, err := c.masterCommand(ctx, "show proc")
		if err != nil {
			return nil, fmt.Errorf("show proc: %w", err)
		}
		return parseShowProc(out)
	}
	replies, err := c.exchange(ctx, []string{"show info"})
	if err != nil {
		return nil, fmt.Errorf("show info: %w", err)
	}
	pid, err := parseInfoPid(replies[0])
	if err != nil {
		return nil, err
	}
	return []int{pid}, nil
}

// parseInfoPid reads the Pid line of a `show info` reply.
func parseInfoPid(reply string) (int, error) {
	for line := range strings.SplitSeq(reply, "\n") {
		v, ok := strings.CutPrefix(line, "Pid: ")
		if !ok {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || pid <= 0 {
			return 0, fmt.Errorf("%w: show info: Pid %.20q", ErrBadReply, v)
		}
		return pid, nil
	}
	return 0, fmt.Errorf("%w: show info: no Pid line (%.80q)", ErrBadReply, reply)
}

// parseShowProc reads the workers of the master CLI's `show proc`: the
// "# workers" section (the current one first), then "# old workers". The
// master and programs are not HAProxy's traffic.
//
//	#<PID>          <type>          <reloads>       <uptime>        <version>
//	2263            master          1 [failed: 0]   0d00h00m09s     2.6.12-1+deb12u3
//	# workers
//	2301            worker          0               0d00h00m02s     2.6.12-1+deb12u3
//	# old workers
//	2264            worker          [was: 1]        0d00h00m09s     2.6.12-1+deb12u3
//	# programs
func parseShowProc(out string) ([]int, error) {
	var pids []int
	section, sawHeader := "", false
	for line := range strings.SplitSeq(out, "\n") {
		if strings.HasPrefix(line, "#") {
			section = strings.TrimSpace(line)
			if strings.HasPrefix(section, "#<PID>") {
				sawHeader = true
			}
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 || (section != "# workers" && section != "# old workers") || f[1] != "worker" {
			continue
		}
		pid, err := strconv.Atoi(f[0])
		if err != nil || pid <= 0 {
			return nil, fmt.Errorf("%w: show proc: worker pid %.20q", ErrBadReply, f[0])
		}
		pids = append(pids, pid)
	}
	if !sawHeader {
		return nil, fmt.Errorf("%w: show proc: not a process list (%.80q)", ErrBadReply, out)
	}
	if len(pids) == 0 {
		return nil, ErrNoWorker
	}
	return pids, nil
}

// masterCommand sends cmd to the master CLI itself (not to a worker, as
// exchange does) and returns its reply.
func (c *Client) masterCommand(ctx context.Context, cmd string) (string, error) {
	var out string
	_, err := c.converse(ctx, []byte("prompt\n"+cmd+"\nquit\n"), func(r io.Reader, extend func()) (err error) {
		out, err = readAll(r, extend)
		return err
	})
	if err != nil {
		return "", err
	}
	replies, err := splitMasterReplies(out, 1)
	if err != nil {
		return "", fmt.Errorf("haproxy: master CLI %s: %w", c.cfg.Socket, err)
	}
	return replies[0], nil
}

// SocketPeer returns the pid of the process that listens on the runtime
// socket, as this process's pid namespace numbers it (SO_PEERCRED): HAProxy's
// master in master-worker mode (it binds the listeners), else its one
// process. 0 when HAProxy runs in a pid namespace this process does not
// see (a sidecar without shareProcessNamespace): the pids HAProxy reports
// (show info, show proc) are then its own namespace's, and name other
// processes here. ok is false for a TCP socket, which carries no
// credentials.
func (c *Client) SocketPeer(ctx context.Context) (pid int, ok bool, err error) {
	if c.cfg.network() != "unix" {
		return 0, false, nil
	}
	conn, err := c.dial(ctx)
	if err != nil {
		return 0, false, err
	}
	defer conn.Close()
	uc, isUnix := conn.(*net.UnixConn)
	if !isUnix {
		return 0, false, nil
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return 0, false, fmt.Errorf("haproxy: %s: %w", c.cfg.Socket, err)
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, false, fmt.Errorf("haproxy: %s: %w", c.cfg.Socket, err)
	}
	if credErr != nil {
		return 0, false, fmt.Errorf("haproxy: %s: SO_PEERCRED: %w", c.cfg.Socket, credErr)
	}
	return int(cred.Pid), true, nil
}
