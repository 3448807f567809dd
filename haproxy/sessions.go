package haproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// Session is one stream HAProxy carries (a client connection and, once a
// server is chosen, the connection to it), as `show sess all` dumps it.
//
// The byte totals advance while data flows, with or without `option
// contstats`, unlike `show stat`'s bin/bout, which move only when a connection
// closes (or every few seconds with contstats): they are the live signal.
type Session struct {
	// ID is HAProxy's handle for the stream, the 0x… address of its struct:
	// what `shutdown session` takes. HAProxy reuses an address once its
	// stream has ended, so ID alone does not name one stream for good.
	ID string
	// Serial is HAProxy's stream number (`id=N`), unique for the process's
	// life: ID and Serial together match one stream across two reads.
	Serial uint64
	// Worker is the pid of the worker the stream was read from through the
	// master CLI's `@!<pid>` (a current or an old worker; WorkerStreams); 0
	// when it was read from the socket's own process or the master's
	// current worker (@1). ID and Serial name a stream in that process
	// only: ShutdownStream closes it there (Ref).
	Worker int
	// Frontend, Backend and Server are the proxy and server names; Backend
	// and Server are "" while HAProxy has not chosen them yet.
	Frontend, Backend, Server string
	// Client is the source address as HAProxy prints it: "ip:port" (an IPv6
	// address without brackets), "unix:N" for a unix listener, "" when unknown.
	Client string
	// Accepted is when HAProxy accepted the connection, in HAProxy's local
	// time zone (which this process does not know) and labelled UTC: compare
	// it only with other Accepted values.
	Accepted time.Time
	// Age is how long the stream has been open when the dump began (to the
	// microsecond when the dump holds the CLI's own stream to compare with,
	// else HAProxy's whole-second, two-unit age such as "1d3h").
	Age time.Duration
	// ReqBytes and ResBytes are the bytes taken in since accept from the
	// client (the request) and from the server (the response): `req …
	// total=` and `res … total=` up to HAProxy 3.2, `scf … in=` and `scb …
	// in=` from 3.4.
	ReqBytes, ResBytes int64
	// Internal: the stream is one of HAProxy's own (its frontend is an
	// internal proxy, id 4294967295 in the dump): a Lua socket's (proxy
	// LUA-SOCKET, server printed "(null)", Server ""), the HTTP client's
	// (<HTTPCLIENT>). It is never a configured backend's, whatever its name.
	Internal bool
}

// ClientAddr parses Client; ok is false for a unix or unknown source.
func (s Session) ClientAddr() (netip.AddrPort, bool) {
	i := strings.LastIndexByte(s.Client, ':')
	if i < 0 {
		return netip.AddrPort{}, false
	}
	addr, err := netip.ParseAddr(s.Client[:i])
	if err != nil {
		return netip.AddrPort{}, false
	}
	port, err := strconv.ParseUint(s.Client[i+1:], 10, 16)
	if err != nil {
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(addr, uint16(port)), true
}

// cliFrontend is the frontend HAProxy's own CLI streams belong to.
const cliFrontend = "GLOBAL"

// maxSessionDump bounds what one `show sess all` may send. The dump takes
// 1.1–1.3 kB per stream and is parsed as it arrives (only the wanted streams
// are kept), so the bound is about time and a peer that never stops talking,
// not memory: 256 MB is some 200,000 streams. The context bounds the total
// time (docs/research/haproxy-stream-counters.md has the measured costs).
const maxSessionDump = 256 << 20

// maxSessionLine bounds one line of the dump; HAProxy's lines are < 300 bytes.
const maxSessionLine = 16 << 10

// Sessions lists the streams of this backend from one `show sess all` (HAProxy
// 2.6 cannot filter the dump: it sends every stream of every proxy, and the
// reader keeps this backend's). A name no backend has gives no sessions.
// A stream that ends while HAProxy dumps it is left out.
func (b *RuntimeBackend) Sessions(ctx context.Context) ([]Session, error) {
	if err := checkName("backend", b.name); err != nil {
		return nil, err
	}
	d, err := b.c.dumpSessions(ctx, "show sess all", func(s *Session) bool { return s.Backend == b.name && !s.Internal })
	if err != nil {
		return nil, fmt.Errorf("backend %s: sessions: %w", b.name, err)
	}
	return d.sessions, nil
}

// Sessions lists every stream of every proxy, HAProxy's CLI streams (frontend
// "GLOBAL") excluded, from one `show sess all`: one dump for all backends.
func (c *Client) Sessions(ctx context.Context) ([]Session, error) {
	d, err := c.dumpSessions(ctx, "show sess all", func(s *Session) bool { return s.Frontend != cliFrontend })
	if err != nil {
		return nil, fmt.Errorf("sessions: %w", err)
	}
	return d.sessions, nil
}

// sessionDump is one parsed `show sess` dump.
type sessionDump struct {
	sessions []Session // the kept streams, in HAProxy's order
	bytes    int64     // size of the reply
	streams  int       // readable stream blocks in the reply, kept or not
	torn     int       // streams that ended while being dumped (left out)
	skipped  int       // stream blocks that could not be read (left out)
	skipErr  error     // why the first of them could not be
}

// dumpOnce sends cmd (`show sess all` or `show sess <id>`) in HAProxy's
// one-command mode, where the reply ends with an empty line and HAProxy
// closes the connection, and parses the dump as it arrives. It does not go
// through roundTrip: that holds the whole reply in memory, and at 10,000
// streams the dump is 10–13 MB of which a backend may need a few lines.
func (c *Client) dumpOnce(ctx context.Context, cmd string, keep func(*Session) bool) (sessionDump, error) {
	return c.dumpThrough(ctx, cmd, cmd, nil, keep)
}

// dumpThrough is dumpOnce with the dump guard asked about guardAs (the form
// of cmd it knows) and, when wrap is set, the reply read through wrap(r) as
// the parser reads it.
func (c *Client) dumpThrough(ctx context.Context, cmd, guardAs string, wrap func(io.Reader) io.Reader, keep func(*Session) bool) (sessionDump, error) {
	if c.trace != nil {
		c.trace([]string{cmd})
	}
	if err := c.checkDumpSafe(ctx, guardAs); err != nil {
		return sessionDump{}, err
	}
	conn, err := c.dial(ctx)
	if err != nil {
		return sessionDump{}, err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if _, err := io.WriteString(conn, c.oneCommand(cmd)); err != nil {
		return sessionDump{}, c.ioError(ctx, "write", err)
	}
	// As in roundTrip, the timeout bounds each read (HAProxy dumps 16 kB at a
	// time between its other work), the context the whole dump.
	var r io.Reader = &pushReader{r: conn, push: func() { c.push(ctx, conn.SetReadDeadline) }}
	if wrap != nil {
		r = wrap(r)
	}
	d, err := parseSessionDump(r, maxSessionDump, keep)
	if err != nil {
		var msg haproxyMessage
		if errors.As(err, &msg) {
			return d, err
		}
		return d, c.ioError(ctx, "read", err)
	}
	return d, nil
}

// pushReader calls push before each Read (to move the read deadline on).
type pushReader struct {
	r    io.Reader
	push func()
}

func (p *pushReader) Read(b []byte) (int, error) {
	p.push()
	return p.r.Read(b)
}

// haproxyMessage is a one-line reply in place of a dump: HAProxy's refusal or
// error text ("Session not found.", "Permission denied").
type haproxyMessage string

func (m haproxyMessage) Error() string { return "haproxy says: " + string(m) }

// isSessionID reports whether id has the form HAProxy prints stream handles
// in (%p: 0x and lowercase hex), which is all `shutdown session` may be given:
// anything else could be a second command or a payload to the CLI.
func isSessionID(id string) bool {
	hex, ok := strings.CutPrefix(id, "0x")
	if !ok || len(hex) == 0 || len(hex) > 16 {
		return false
	}
	return strings.Trim(hex, "0123456789abcdef") == ""
}
