package haproxy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
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
	// ReqBytes and ResBytes are the bytes forwarded since accept, client to
	// server (`req … total=`) and server to client (`res … total=`).
	ReqBytes, ResBytes int64
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
// time (docs/haproxy-stream-counters.md has the measured costs).
const maxSessionDump = 256 << 20

// maxSessionLine bounds one line of the dump; HAProxy's lines are < 300 bytes.
const maxSessionLine = 16 << 10

// Sessions lists the streams of this backend from one `show sess all` (HAProxy
// 2.6 cannot filter the dump: it sends every stream of every proxy, and the
// reader keeps this backend's). A name no backend has gives no sessions.
// A stream that ends while HAProxy dumps it is left out.
func (b *Backend) Sessions(ctx context.Context) ([]Session, error) {
	if err := checkName("backend", b.name); err != nil {
		return nil, err
	}
	d, err := b.c.dumpSessions(ctx, "show sess all", func(s *Session) bool { return s.Backend == b.name })
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
	streams  int       // complete stream blocks in the reply, kept or not
	torn     int       // streams that ended while being dumped (left out)
}

// dumpOnce sends cmd (`show sess all` or `show sess <id>`) in HAProxy's
// one-command mode, where the reply ends with an empty line and HAProxy
// closes the connection, and parses the dump as it arrives. It does not go
// through roundTrip: that holds the whole reply in memory, and at 10,000
// streams the dump is 10–13 MB of which a backend may need a few lines.
func (c *Client) dumpOnce(ctx context.Context, cmd string, keep func(*Session) bool) (sessionDump, error) {
	if c.trace != nil {
		c.trace([]string{cmd})
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
	r := &pushReader{r: conn, push: func() { c.push(ctx, conn.SetReadDeadline) }}
	d, err := parseSessionDump(r, maxSessionDump, keep)
	if err != nil {
		var msg haproxyMessage
		if errors.As(err, &msg) {
			return d, err
		}
		return d, c.ioError(ctx, "read", ctxFirst(ctx, err))
	}
	return d, nil
}

// ctxFirst reports a read that timed out at the context's deadline as the
// context's error: the socket deadline is the context's, and it can fire a
// moment before the context's own timer marks it done.
func ctxFirst(ctx context.Context, err error) error {
	var ne net.Error
	if dl, ok := ctx.Deadline(); ok && errors.As(err, &ne) && ne.Timeout() && !time.Now().Before(dl) {
		return fmt.Errorf("%w (%w)", context.DeadlineExceeded, err)
	}
	return err
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

// sessionLine ranks the lines of a stream block in the order HAProxy prints
// them. Each must come once, in this order: two blocks run together (a lost
// header) then fail instead of giving one stream the other's server.
const (
	lineHeader = iota
	lineFrontend
	lineBackend
	lineServer
	lineTask
	lineReq
	lineRes
	lineCount
)

// parseSessionDump reads a `show sess all` (or `show sess <id>`) reply from r,
// at most limit bytes, and returns the streams keep accepts. The reply must
// end with HAProxy's empty line and then EOF: a dump cut short is an error,
// never a shorter list. A block HAProxy marks as "terminated while we were
// watching it" is left out. keep sees complete streams only.
func parseSessionDump(r io.Reader, limit int64, keep func(*Session) bool) (sessionDump, error) {
	var d sessionDump
	br := bufio.NewReaderSize(io.LimitReader(r, limit+1), maxSessionLine)
	var (
		cur     Session
		coarse  [2]time.Duration // HAProxy's age and its resolution, for cur
		seen    [lineCount]bool
		last    = -1 // rank of the last line recognised in cur; -1: no block open
		ended   bool
		ref     time.Time // the newest CLI stream's accept: "now" in HAProxy's clock
		index   = make(map[string]int)
		coarses []([2]time.Duration)
	)
	finish := func() error {
		if last < 0 {
			return nil
		}
		defer func() { last, seen = -1, [lineCount]bool{} }()
		for rank, ok := range seen {
			if !ok {
				return fmt.Errorf("%w: stream %s: no %s line", ErrBadReply, cur.ID, lineNames[rank])
			}
		}
		d.streams++
		if cur.Frontend == cliFrontend && cur.Accepted.After(ref) {
			ref = cur.Accepted
		}
		// HAProxy reuses a freed stream's address, and a stream created
		// during the dump is listed after the ones before it: of two entries
		// with one address the later is the live one, kept or not.
		i, dup := index[cur.ID]
		if keep != nil && !keep(&cur) {
			if dup {
				d.sessions[i].ID = "" // dropped below
				delete(index, cur.ID)
			}
			return nil
		}
		if dup {
			d.sessions[i], coarses[i] = cur, coarse
			return nil
		}
		index[cur.ID] = len(d.sessions)
		d.sessions = append(d.sessions, cur)
		coarses = append(coarses, coarse)
		return nil
	}
	for lineNo := 1; ; lineNo++ {
		raw, err := br.ReadSlice('\n')
		d.bytes += int64(len(raw))
		if d.bytes > limit {
			return d, fmt.Errorf("%w: session dump larger than %d MB", ErrBadReply, limit>>20)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			return d, fmt.Errorf("%w: session dump line %d longer than %d bytes (%.80q)", ErrBadReply, lineNo, maxSessionLine, raw)
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return d, fmt.Errorf("session dump line %d, after %d bytes: %w", lineNo, d.bytes, err)
		}
		if errors.Is(err, io.EOF) {
			if len(raw) > 0 || !ended {
				return d, fmt.Errorf("%w: session dump cut short after %d bytes (no end line)", ErrBadReply, d.bytes)
			}
			break
		}
		if ended {
			return d, fmt.Errorf("%w: data after the end of the session dump (%.80q)", ErrBadReply, raw)
		}
		if last >= 0 && skippable(raw) {
			continue // most of a block; not made a string, at 200,000 lines a dump
		}
		line := string(raw[:len(raw)-1])
		switch {
		case strings.HasPrefix(line, "  *** session terminated"):
			// HAProxy prints a stream's block in one piece, and this line in
			// its place when the stream ended before the piece fitted in
			// the output buffer: the block before it is whole. Should a
			// partial block ever precede it, that block is the torn one.
			if last >= 0 && !complete(seen) {
				last, seen = -1, [lineCount]bool{}
			}
			if err := finish(); err != nil {
				return d, err
			}
			d.torn++
		case line == "":
			if err := finish(); err != nil {
				return d, err
			}
			ended = true
		case strings.HasPrefix(line, "0x"):
			if err := finish(); err != nil {
				return d, err
			}
			cur, coarse = Session{}, [2]time.Duration{}
			if err := parseSessionHeader(line, &cur); err != nil {
				return d, fmt.Errorf("%w: session dump line %d: %w", ErrBadReply, lineNo, err)
			}
			seen[lineHeader], last = true, lineHeader
		case last < 0:
			// Not a stream: a first line such as "Session not found." is
			// HAProxy's answer if it is the whole reply, else garbage.
			if lineNo == 1 && isMessage(line) {
				rest, _ := io.ReadAll(io.LimitReader(br, 2))
				if string(rest) == "\n" {
					return d, haproxyMessage(strings.TrimSuffix(line, "."))
				}
			}
			return d, fmt.Errorf("%w: session dump line %d is not a stream (%.80q)", ErrBadReply, lineNo, line)
		default:
			rank, err := parseSessionLine(line, &cur, &coarse)
			if err != nil {
				return d, fmt.Errorf("%w: session dump line %d, stream %s: %w", ErrBadReply, lineNo, cur.ID, err)
			}
			if rank < 0 {
				continue
			}
			if rank <= last || seen[rank] {
				return d, fmt.Errorf("%w: session dump line %d: stream %s has a %s line out of place", ErrBadReply, lineNo, cur.ID, lineNames[rank])
			}
			seen[rank], last = true, rank
		}
	}
	live := d.sessions[:0]
	for i, s := range d.sessions {
		if s.ID == "" {
			continue
		}
		s.Age = refineAge(ref, s.Accepted, coarses[i][0], coarses[i][1])
		live = append(live, s)
	}
	d.sessions = live
	return d, nil
}

// wantedLines start the lines of a block the parser reads.
var wantedLines = [][]byte{[]byte("  frontend="), []byte("  backend="), []byte("  server="),
	[]byte("  task="), []byte("  req="), []byte("  res="), []byte("  *** ")}

// skippable reports whether a line inside a block is indented and none of
// wantedLines: a continuation (six spaces) or a field not read (flags=, scf=…).
func skippable(raw []byte) bool {
	if len(raw) < 3 || raw[0] != ' ' || raw[1] != ' ' {
		return false
	}
	if raw[2] == ' ' {
		return true
	}
	for _, w := range wantedLines {
		if bytes.HasPrefix(raw, w) {
			return false
		}
	}
	return true
}

// complete reports whether a block has every line a stream needs.
func complete(seen [lineCount]bool) bool {
	for _, ok := range seen {
		if !ok {
			return false
		}
	}
	return true
}

var lineNames = [lineCount]string{"header", "frontend", "backend", "server", "task", "req", "res"}

// isMessage tells a short line of text from binary garbage.
func isMessage(line string) bool {
	if len(line) == 0 || len(line) > 200 || line[0] == ' ' {
		return false
	}
	for _, r := range line {
		if r < ' ' || r > '~' {
			return false
		}
	}
	return true
}

// parseSessionHeader parses a block's first line:
// `0x55d…: [01/Dec/2026:16:52:16.520930] id=4 proto=tcpv4 source=127.0.0.1:48668`
// (no source when HAProxy has none to print).
func parseSessionHeader(line string, s *Session) error {
	id, rest, ok := strings.Cut(line, ": [")
	if !ok || !isSessionID(id) {
		return fmt.Errorf("bad stream header %.80q", line)
	}
	date, rest, ok := strings.Cut(rest, "] ")
	if !ok {
		return fmt.Errorf("stream %s: no accept date in %.80q", id, line)
	}
	at, err := time.Parse("02/Jan/2006:15:04:05.000000", date)
	if err != nil {
		return fmt.Errorf("stream %s: accept date: %w", id, err)
	}
	fields := strings.Fields(rest)
	if len(fields) < 2 || len(fields) > 3 || !strings.HasPrefix(fields[0], "id=") || !strings.HasPrefix(fields[1], "proto=") {
		return fmt.Errorf("stream %s: unexpected header fields %.80q", id, rest)
	}
	serial, err := strconv.ParseUint(fields[0][len("id="):], 10, 64)
	if err != nil {
		return fmt.Errorf("stream %s: %w", id, err)
	}
	*s = Session{ID: id, Serial: serial, Accepted: at}
	if len(fields) == 3 {
		src, ok := strings.CutPrefix(fields[2], "source=")
		if !ok {
			return fmt.Errorf("stream %s: unexpected header field %.80q", id, fields[2])
		}
		s.Client = src
	}
	return nil
}

// parseSessionLine reads the fields wanted from one indented line of a block
// and returns the line's rank, or -1 for a line not needed.
func parseSessionLine(line string, s *Session, coarse *[2]time.Duration) (int, error) {
	key, rest, ok := strings.Cut(strings.TrimLeft(line, " "), "=")
	if !ok || !strings.HasPrefix(line, "  ") {
		return -1, nil
	}
	// Every wanted line is indented by exactly two spaces; the continuation
	// lines (an_exp=, buf=, flags=…) by six.
	if strings.HasPrefix(line, "   ") {
		return -1, nil
	}
	word, _, _ := strings.Cut(rest, " ")
	switch key {
	case "frontend", "backend", "server":
		name, err := proxyName(key, word)
		if err != nil {
			return 0, err
		}
		switch key {
		case "frontend":
			s.Frontend = name
			return lineFrontend, nil
		case "backend":
			s.Backend = name
			return lineBackend, nil
		}
		s.Server = name
		return lineServer, nil
	case "task":
		age, ok := fieldValue(rest, "age=")
		if !ok {
			return 0, fmt.Errorf("no age in %.80q", line)
		}
		d, res, err := parseHumanTime(age)
		if err != nil {
			return 0, err
		}
		coarse[0], coarse[1] = d, res
		return lineTask, nil
	case "req", "res":
		total, ok := fieldValue(rest, "total=")
		if !ok {
			return 0, fmt.Errorf("no total in %.80q", line)
		}
		n, err := strconv.ParseInt(total, 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("%s total %q is not a byte count", key, total)
		}
		if key == "req" {
			s.ReqBytes = n
			return lineReq, nil
		}
		s.ResBytes = n
		return lineRes, nil
	}
	return -1, nil
}

// fieldValue returns the value of the field named by prefix (`age=`), up to
// the next space or closing parenthesis.
func fieldValue(s, prefix string) (string, bool) {
	i := strings.Index(s, " "+prefix)
	if i < 0 {
		i = strings.Index(s, "("+prefix)
	}
	if i < 0 {
		return "", false
	}
	v := s[i+1+len(prefix):]
	if j := strings.IndexAny(v, " )"); j >= 0 {
		v = v[:j]
	}
	return v, v != ""
}

// proxyName checks a frontend, backend or server name from the dump and maps
// HAProxy's placeholders for "not chosen yet" to "". An empty or impossible
// name is an error: it must not pass for "no server". HAProxy's internal
// proxies and servers ("<HTTPCLIENT>", behind Lua's httpclient, ocsp-update
// and ACME) are named in angle brackets, which no configured name can hold:
// they are kept as printed, so they never match a backend of the daemon.
func proxyName(kind, name string) (string, error) {
	if name == "<NONE>" || name == "<none>" {
		return "", nil
	}
	if inner, ok := strings.CutPrefix(name, "<"); ok {
		if inner, ok = strings.CutSuffix(inner, ">"); ok && ValidName(inner) == nil {
			return name, nil
		}
	}
	if err := checkName(kind, name); err != nil {
		return "", err
	}
	return name, nil
}

// parseHumanTime parses HAProxy's human_time(): at most two units out of
// d, h, m, s, as in "0s", "59s", "2m3s", "1h", "1d5m". It returns the
// duration and its resolution (the last unit printed). "?" (a clock that
// went backwards) is 0 seconds.
func parseHumanTime(s string) (d, res time.Duration, err error) {
	if s == "?" {
		return 0, time.Second, nil
	}
	units := map[byte]time.Duration{'d': 24 * time.Hour, 'h': time.Hour, 'm': time.Minute, 's': time.Second}
	prev := time.Duration(1 << 62)
	rest := s
	for n := 0; rest != ""; n++ {
		i := 0
		for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
			i++
		}
		if i == 0 || i > 9 || i == len(rest) || n == 2 {
			return 0, 0, fmt.Errorf("bad age %q", s)
		}
		unit, ok := units[rest[i]]
		if !ok || unit >= prev {
			return 0, 0, fmt.Errorf("bad age %q", s)
		}
		v, _ := strconv.ParseInt(rest[:i], 10, 64)
		d += time.Duration(v) * unit
		prev, res = unit, unit
		rest = rest[i+1:]
	}
	if res == 0 {
		return 0, 0, fmt.Errorf("bad age %q", s)
	}
	return d, res, nil
}

// refineAge returns the microsecond age ref−accepted when ref (the accept time
// of the newest CLI stream, ours or one just as recent, i.e. the moment the
// dump began, in HAProxy's clock) is known and agrees with HAProxy's coarse
// age, else the coarse age. The check catches a clock or time-zone change
// (DST) between the two accepts; the slack covers a dump that takes a while,
// since HAProxy computes each coarse age when it reaches the stream.
func refineAge(ref, accepted time.Time, coarse, res time.Duration) time.Duration {
	if ref.IsZero() {
		return coarse
	}
	precise := ref.Sub(accepted)
	const slack = 2 * time.Second
	if precise < 0 || precise < coarse-slack || precise >= coarse+res+slack {
		return coarse
	}
	return precise
}

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
