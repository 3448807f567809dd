package haproxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// Finding a stream by its server-side connection. The kernel's socket table
// gives each of HAProxy's connections to a server as a 4-tuple: HAProxy's
// side (its source address and port towards the server) and the server's.
// `show sess all` prints the same on every version from 2.6 to 3.4, on the
// stream's backend and server lines:
//
//	backend=be_app (id=4 mode=tcp) addr=127.0.0.1:39552   ← HAProxy's side
//	server=s1 (id=1) addr=127.0.0.1:40589                 ← the server's
//
// so a connection the socket table chose can be mapped to the stream id
// `shutdown session` takes. What is sent (HAProxy's management.txt of each
// version):
//   - 3.2 and later: `show sess all server <backend>/<server>`, the server's
//     streams only (the `backend`, `server` and `older` filters; 3.0 has
//     `show sess older <age>` alone, in place of `all`, and 2.6 no filter);
//   - earlier: `show sess all`, every stream of the process, kept here for
//     the one server. On 3.0 the dump guard applies (sessions_guard.go).

// ServerStreams is one read of a server's streams, by HAProxy's side of
// their server connection.
type ServerStreams struct {
	// Streams maps each stream's server connection to the stream (only
	// streams whose backend and server lines printed an address: those
	// with a server connection). HAProxy's side alone is not unique: one
	// source port may serve connections to two servers.
	Streams map[ServerConn]Session
	// Command is what was sent; Bytes the reply's size; Total the streams
	// the reply held (the whole process's with `show sess all`).
	Command string
	Bytes   int64
	Total   int
	Took    time.Duration
	// PID is the process that answered, as its `show info` says: the
	// process the streams' ids belong to.
	PID int
}

// ServerConn is a stream's server connection: HAProxy's side (its source
// address and port) and the server's.
type ServerConn struct {
	Local, Remote netip.AddrPort
}

// FilteredDumpFrom is the first HAProxy version whose `show sess all`
// takes a `server <backend>/<server>` filter (seen in 3.2's management.txt;
// 3.0's has none; 3.1 was not tried).
const FilteredDumpFrom = 302

// ServerStreams reads the streams of one server of the backend ("": of
// every server of it) with HAProxy's side of each one's server connection,
// so that a connection the socket table lists can be closed by its stream
// id. It sends as little as the running version allows (see above; for the
// whole backend, `backend <b>` in place of `server <b/s>`). Errors as
// Sessions' (and ErrStreamDumpUnsafe on a version the dump guard holds
// back).
func (b *RuntimeBackend) ServerStreams(ctx context.Context, server string) (ServerStreams, error) {
	return b.WorkerStreams(ctx, 0, server)
}

// WorkerStreams is ServerStreams of the worker pid through the master CLI
// (`@!<pid>`: the current worker or one a reload replaced, which serves its
// connections until they end); pid 0 is the socket's process (the master's
// current worker, @1). Each stream's Worker is pid, so that ShutdownStream
// closes it in the process that has it. A worker that has exited gives an
// error wrapping ErrNoWorker. The version is asked of that worker: an old
// worker may run another version than the current one.
func (b *RuntimeBackend) WorkerStreams(ctx context.Context, pid int, server string) (ServerStreams, error) {
	if err := checkName("backend", b.name); err != nil {
		return ServerStreams{}, err
	}
	if server != "" {
		if err := checkName("server", server); err != nil {
			return ServerStreams{}, err
		}
	}
	c := b.c.inWorker(pid)
	where := ""
	if c.pid != 0 {
		where = fmt.Sprintf(" of worker %d", c.pid)
	}
	began := time.Now()
	replies, err := c.exchange(ctx, []string{"show info"})
	if err != nil {
		if c.pid != 0 && workerGone(err) && !errors.Is(err, ErrNoWorker) {
			err = fmt.Errorf("%w (%w)", ErrNoWorker, err)
		}
		return ServerStreams{}, fmt.Errorf("backend %s: server streams%s: show info: %w", b.name, where, err)
	}
	cmd := "show sess all"
	if info, err := parseInfo(replies[0]); err == nil && info.major*100+info.minor >= FilteredDumpFrom {
		cmd = "show sess all backend " + b.name
		if server != "" {
			cmd = fmt.Sprintf("show sess all server %s/%s", b.name, server)
		}
	}
	answered, _ := parseInfoPid(replies[0])
	tap := &addrTap{backend: []byte(b.name)}
	d, err := c.dumpTapped(ctx, cmd, tap, func(s *Session) bool {
		return s.Backend == b.name && s.Server != "" && (server == "" || s.Server == server) && !s.Internal
	})
	if err != nil {
		if c.pid != 0 && workerGone(err) && !errors.Is(err, ErrNoWorker) {
			err = fmt.Errorf("%w (%w)", ErrNoWorker, err)
		}
		return ServerStreams{}, fmt.Errorf("backend %s: server streams%s (%s): %w", b.name, where, cmd, err)
	}
	out := ServerStreams{Streams: map[ServerConn]Session{}, Command: cmd, Bytes: d.bytes, Total: d.streams + d.skipped, PID: answered}
	for _, s := range d.sessions {
		side, ok := tap.side[s.ID]
		if !ok || !side.Local.IsValid() || !side.Remote.IsValid() {
			continue
		}
		s.Worker = c.pid
		out.Streams[side] = s
	}
	out.Took = time.Since(began)
	return out, nil
}

// dumpTapped is dumpOnce with tap reading the reply as the parser does.
// The guard knows the forms `show sess all` and `show sess <id>`; a
// filtered dump is sent only to versions it lets through anyway.
func (c *Client) dumpTapped(ctx context.Context, cmd string, tap *addrTap, keep func(*Session) bool) (sessionDump, error) {
	return c.dumpThrough(ctx, cmd, "show sess all", func(r io.Reader) io.Reader { tap.r = r; return tap }, keep)
}

// addrTap passes a session dump through unchanged and notes, for each
// stream block of backend, the addresses of its backend and server lines,
// which the dump parser does not keep. A later block at the same stream
// address replaces an earlier one, as in the parser.
type addrTap struct {
	r       io.Reader
	backend []byte
	side    map[string]ServerConn
	line    []byte // the current line so far
	id      string // the current block's stream id
	mine    bool   // the current block is backend's
}

func (t *addrTap) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	for rest := p[:n]; len(rest) > 0; {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			t.add(rest)
			break
		}
		t.add(rest[:i])
		t.endLine()
		rest = rest[i+1:]
	}
	return n, err
}

// add appends to the current line what it needs: the lines read are at
// most a few hundred bytes; a longer one (which the parser refuses) is
// cut, not kept whole.
func (t *addrTap) add(b []byte) {
	if room := maxSessionLine - len(t.line); room > 0 {
		t.line = append(t.line, b[:min(len(b), room)]...)
	}
}

func (t *addrTap) endLine() {
	line := t.line
	t.line = t.line[:0]
	switch {
	case bytes.HasPrefix(line, []byte("0x")):
		id, _, _ := bytes.Cut(line, []byte(":"))
		t.id, t.mine = string(id), false
	case t.id == "":
	case bytes.HasPrefix(line, []byte("  backend=")):
		name, _, _ := bytes.Cut(line[len("  backend="):], []byte(" "))
		t.mine = bytes.Equal(name, t.backend)
		if !t.mine {
			return
		}
		if t.side == nil {
			t.side = map[string]ServerConn{}
		}
		t.side[t.id] = ServerConn{Local: lineAddr(line)}
	case t.mine && bytes.HasPrefix(line, []byte("  server=")):
		s := t.side[t.id]
		s.Remote = lineAddr(line)
		t.side[t.id] = s
	}
}

// lineAddr parses a line's addr= field: "ip:port", an IPv6 address with or
// without brackets; the zero value when absent or not an address ("?",
// "unix:1", a server side not connected yet).
func lineAddr(line []byte) netip.AddrPort {
	v, ok := fieldValue(string(line), "addr=")
	if !ok {
		return netip.AddrPort{}
	}
	i := strings.LastIndexByte(v, ':')
	if i < 0 {
		return netip.AddrPort{}
	}
	addr, err := netip.ParseAddr(strings.Trim(v[:i], "[]"))
	if err != nil {
		return netip.AddrPort{}
	}
	port, err := strconv.ParseUint(v[i+1:], 10, 16)
	if err != nil || port == 0 {
		return netip.AddrPort{}
	}
	return netip.AddrPortFrom(addr.Unmap(), uint16(port))
}
