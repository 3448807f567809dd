package haproxy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// How a `show sess all` reply is read. HAProxy's manual leaves the format
// undocumented "so that it can freely evolve"; the parser reads the fields
// HAProxy 2.6, 3.0, 3.2 and 3.4 print (replies of each in ../testdata/):
//
//	0x…: [01/Dec/2026:16:55:19.138773] id=1 proto=tcpv4 source=127.0.0.1:38180
//	  frontend=fe_app (id=2 mode=tcp), listener=? (id=1) addr=…
//	  backend=be_app (id=4 mode=tcp) addr=…
//	  server=s1 (id=1) addr=…
//	  task=0x… (state=0x00 … age=0s)
//	  scf=0x… flags=… state=EST endp=CONN,… sub=1 [in=1000 out=0 …]   (3.4: in=/out=)
//	  scb=0x… flags=… state=EST endp=CONN,… sub=1 [in=0 out=1000 …]
//	  req=0x… (f=… an=0x0 pipe=0 tofwd=-1 total=1000)                  (up to 3.2: total=)
//	  res=0x… (f=… an=0x0 pipe=0 tofwd=-1 total=0)
//
// and more lines it does not need (indented further, or fields not read).
//
// One stream the parser cannot read is skipped and counted (sessionDump.skipped,
// with the first reason), never the whole reply: a stream of a kind it has not
// seen must not cost every backend its reading. A reply that is wrong as a
// whole is refused: cut short, not a dump at all, or one in which more streams
// are unreadable than readable (a format this parser does not know).

// Line ranks: the lines of a stream block in the order HAProxy prints them.
// Each comes at most once, in this order: two blocks run together (a lost
// header) then show as a line out of place, and the block is skipped instead
// of giving one stream the other's server.
const (
	lineHeader = iota
	lineFrontend
	lineBackend
	lineServer
	lineTask
	lineSCF
	lineSCB
	lineReq
	lineRes
	lineCount
)

var lineNames = [lineCount]string{"header", "frontend", "backend", "server", "task", "scf", "scb", "req", "res"}

// requiredLines are the lines a block must have; scf and scb carry the byte
// counts only from 3.4 on and are checked with them.
var requiredLines = []int{lineHeader, lineFrontend, lineBackend, lineServer, lineTask, lineReq, lineRes}

// internalProxyID is how HAProxy prints the id of its internal proxies (-1 as
// an unsigned int): Lua's LUA-SOCKET, the HTTP client's <HTTPCLIENT>.
const internalProxyID = "4294967295"

// streamBlock is the stream block being read.
type streamBlock struct {
	open   bool
	s      Session
	coarse [2]time.Duration // HAProxy's age and its resolution
	seen   [lineCount]bool
	last   int // rank of the last line recognised
	// The byte counts as each layout prints them: the channels' total=
	// (up to 3.2), the stream connectors' in= (3.4).
	reqTotal, resTotal, scfIn, scbIn int64
	// nullServer: the server is printed "(null)", an unnamed server, which
	// only an internal proxy has (Lua's socket server).
	nullServer bool
	bad        error // why the block cannot be read; nil while it can
}

// fail marks the block unreadable, keeping the first reason.
func (b *streamBlock) fail(lineNo int, err error) {
	if b.bad == nil {
		b.bad = fmt.Errorf("session dump line %d, stream %s: %w", lineNo, b.s.ID, err)
	}
}

// dumpParser is parseSessionDump's state.
type dumpParser struct {
	br       *bufio.Reader
	limit    int64
	keep     func(*Session) bool
	d        sessionDump
	lineNo   int
	ended    bool // HAProxy's empty end line was read
	blk      streamBlock
	ref      time.Time      // the newest CLI stream's accept: "now" in HAProxy's clock
	index    map[string]int // kept stream ID → index in d.sessions
	coarses  [][2]time.Duration
	readable int // readable streams other than HAProxy's CLI's
}

// parseSessionDump reads a `show sess all` (or `show sess <id>`) reply from r,
// at most limit bytes, and returns the streams keep accepts. The reply must
// end with HAProxy's empty line and then EOF: a dump cut short is an error,
// never a shorter list. A block HAProxy marks as "terminated while we were
// watching it" is left out (torn); a block that cannot be read is left out
// and counted (skipped). keep sees complete, readable streams only.
func parseSessionDump(r io.Reader, limit int64, keep func(*Session) bool) (sessionDump, error) {
	p := &dumpParser{
		br:    bufio.NewReaderSize(io.LimitReader(r, limit+1), maxSessionLine),
		limit: limit, keep: keep, index: make(map[string]int),
	}
	for {
		raw, done, err := p.nextLine()
		if err != nil {
			return p.d, err
		}
		if done {
			break
		}
		if p.blk.open && skippable(raw) {
			continue // most of a block; not made a string, at 200,000 lines a dump
		}
		if err := p.line(string(raw[:len(raw)-1])); err != nil {
			return p.d, err
		}
	}
	if err := p.checkWhole(); err != nil {
		return p.d, err
	}
	p.dropReplaced()
	return p.d, nil
}

// nextLine returns the next line with its newline, or done at the EOF after
// the end line. Anything else at the end, or beyond the limits, is an error.
func (p *dumpParser) nextLine() (raw []byte, done bool, err error) {
	p.lineNo++
	raw, err = p.br.ReadSlice('\n')
	p.d.bytes += int64(len(raw))
	switch {
	case p.d.bytes > p.limit:
		return nil, false, fmt.Errorf("%w: session dump larger than %d MB", ErrBadReply, p.limit>>20)
	case errors.Is(err, bufio.ErrBufferFull):
		return nil, false, fmt.Errorf("%w: session dump line %d longer than %d bytes (%.80q)", ErrBadReply, p.lineNo, maxSessionLine, raw)
	case errors.Is(err, io.EOF):
		if len(raw) > 0 || !p.ended {
			return nil, false, fmt.Errorf("%w: session dump cut short after %d bytes (no end line)", ErrBadReply, p.d.bytes)
		}
		return nil, true, nil
	case err != nil:
		return nil, false, fmt.Errorf("session dump line %d, after %d bytes: %w", p.lineNo, p.d.bytes, err)
	case p.ended:
		return nil, false, fmt.Errorf("%w: data after the end of the session dump (%.80q)", ErrBadReply, raw)
	}
	return raw, false, nil
}

// line handles one line (without its newline).
func (p *dumpParser) line(line string) error {
	switch {
	case strings.HasPrefix(line, "  *** session terminated"):
		p.torn()
	case line == "":
		p.closeBlock()
		p.ended = true
	case strings.HasPrefix(line, "0x"):
		p.closeBlock()
		p.openBlock(line)
	case !p.blk.open:
		return p.outsideBlock(line)
	default:
		p.blockLine(line)
	}
	return nil
}

// torn handles HAProxy's "*** session terminated while we were watching it
// ***". HAProxy prints a stream's block in one piece, and this line in its
// place when the stream ended before the piece fitted in the output buffer:
// the block before it is whole. Should a partial block ever precede it, that
// block is the torn one.
func (p *dumpParser) torn() {
	if p.blk.open && !p.blk.complete() {
		p.blk = streamBlock{}
	}
	p.closeBlock()
	p.d.torn++
}

// openBlock starts a block at its header line.
func (p *dumpParser) openBlock(line string) {
	p.blk = streamBlock{open: true, last: lineHeader, reqTotal: -1, resTotal: -1, scfIn: -1, scbIn: -1}
	p.blk.seen[lineHeader] = true
	if err := parseSessionHeader(line, &p.blk.s); err != nil {
		p.blk.fail(p.lineNo, err)
	}
}

// outsideBlock handles a line before any block: a first line such as "Session
// not found." is HAProxy's answer if it is the whole reply, else garbage.
func (p *dumpParser) outsideBlock(line string) error {
	if p.lineNo == 1 && isMessage(line) {
		rest, _ := io.ReadAll(io.LimitReader(p.br, 2))
		if string(rest) == "\n" {
			return haproxyMessage(strings.TrimSuffix(line, "."))
		}
	}
	return fmt.Errorf("%w: session dump line %d is not a stream (%.80q)", ErrBadReply, p.lineNo, line)
}

// blockLine reads one indented line of the open block. Once the block is
// unreadable its lines are passed over up to the next block.
func (p *dumpParser) blockLine(line string) {
	b := &p.blk
	if b.bad != nil {
		return
	}
	rank, err := parseSessionLine(line, b)
	if err != nil {
		b.fail(p.lineNo, err)
		return
	}
	if rank < 0 {
		return
	}
	if rank <= b.last || b.seen[rank] {
		b.fail(p.lineNo, fmt.Errorf("a %s line out of place", lineNames[rank]))
		return
	}
	b.seen[rank], b.last = true, rank
}

// complete reports whether the block has every line a stream needs.
func (b *streamBlock) complete() bool {
	for _, rank := range requiredLines {
		if !b.seen[rank] {
			return false
		}
	}
	return true
}

// check finishes a block: every required line, byte counts in one of the
// layouts, a "(null)" server only on an internal proxy.
func (b *streamBlock) check() error {
	if b.bad != nil {
		return b.bad
	}
	for _, rank := range requiredLines {
		if !b.seen[rank] {
			return fmt.Errorf("stream %s: no %s line", b.s.ID, lineNames[rank])
		}
	}
	switch {
	case b.reqTotal >= 0 && b.resTotal >= 0:
		b.s.ReqBytes, b.s.ResBytes = b.reqTotal, b.resTotal
	case b.scfIn >= 0 && b.scbIn >= 0:
		// 3.4: what the client side took in is the request, what the
		// server side took in the response (testdata/README.md).
		b.s.ReqBytes, b.s.ResBytes = b.scfIn, b.scbIn
	default:
		return fmt.Errorf("stream %s: no byte counts (neither req/res total= nor scf/scb in=)", b.s.ID)
	}
	if b.nullServer && !b.s.Internal {
		return fmt.Errorf("stream %s: server (null) on proxy %q, which is not one of HAProxy's internal proxies", b.s.ID, b.s.Backend)
	}
	return nil
}

// closeBlock ends the open block: counted and kept if keep takes it,
// counted as skipped if it cannot be read.
func (p *dumpParser) closeBlock() {
	if !p.blk.open {
		return
	}
	b := p.blk
	p.blk = streamBlock{}
	if err := b.check(); err != nil {
		p.d.skipped++
		if p.d.skipErr == nil {
			p.d.skipErr = err
		}
		// A stream listed earlier at this address has ended: this one took
		// its address.
		p.forget(b.s.ID)
		return
	}
	p.d.streams++
	if b.s.Frontend == cliFrontend {
		p.ref = later(p.ref, b.s.Accepted)
	} else {
		p.readable++
	}
	p.keepStream(b.s, b.coarse)
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// keepStream adds s if keep takes it. HAProxy reuses a freed stream's
// address, and a stream created during the dump is listed after the ones
// before it: of two entries with one address the later is the live one,
// kept or not.
func (p *dumpParser) keepStream(s Session, coarse [2]time.Duration) {
	i, dup := p.index[s.ID]
	if p.keep != nil && !p.keep(&s) {
		p.forget(s.ID)
		return
	}
	if dup {
		p.d.sessions[i], p.coarses[i] = s, coarse
		return
	}
	p.index[s.ID] = len(p.d.sessions)
	p.d.sessions = append(p.d.sessions, s)
	p.coarses = append(p.coarses, coarse)
}

// forget drops the kept stream at address id, if any.
func (p *dumpParser) forget(id string) {
	if i, ok := p.index[id]; ok {
		p.d.sessions[i].ID = "" // dropped by dropReplaced
		delete(p.index, id)
	}
}

// checkWhole refuses a dump in which more streams are unreadable than
// readable (HAProxy's CLI stream not counted): a format this parser does
// not know, where the few streams read would not be the backends' load.
func (p *dumpParser) checkWhole() error {
	if p.d.skipped > 0 && p.d.skipped > p.readable {
		return fmt.Errorf("%w: %d of %d streams unreadable (first: %w)", ErrBadReply, p.d.skipped, p.d.skipped+p.readable, p.d.skipErr)
	}
	return nil
}

// dropReplaced removes the entries a later one with the same address
// replaced, and sets each stream's age.
func (p *dumpParser) dropReplaced() {
	live := p.d.sessions[:0]
	for i, s := range p.d.sessions {
		if s.ID == "" {
			continue
		}
		s.Age = refineAge(p.ref, s.Accepted, p.coarses[i][0], p.coarses[i][1])
		live = append(live, s)
	}
	p.d.sessions = live
}

// wantedLines start the lines of a block the parser reads.
var wantedLines = [][]byte{[]byte("  frontend="), []byte("  backend="), []byte("  server="),
	[]byte("  task="), []byte("  scf="), []byte("  scb="), []byte("  req="), []byte("  res="), []byte("  *** ")}

// skippable reports whether a line inside a block is indented and none of
// wantedLines: a continuation (four or six spaces) or a field not read
// (flags=, p_con=…).
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
// (no source when HAProxy has none to print). It sets s's ID first, so that
// an error names the stream.
func parseSessionHeader(line string, s *Session) error {
	id, rest, ok := strings.Cut(line, ": [")
	if !ok || !isSessionID(id) {
		return fmt.Errorf("bad stream header %.80q", line)
	}
	*s = Session{ID: id}
	date, rest, ok := strings.Cut(rest, "] ")
	if !ok {
		return fmt.Errorf("no accept date in %.80q", line)
	}
	at, err := time.Parse("02/Jan/2006:15:04:05.000000", date)
	if err != nil {
		return fmt.Errorf("accept date: %w", err)
	}
	fields := strings.Fields(rest)
	if len(fields) < 2 || len(fields) > 3 || !strings.HasPrefix(fields[0], "id=") || !strings.HasPrefix(fields[1], "proto=") {
		return fmt.Errorf("unexpected header fields %.80q", rest)
	}
	serial, err := strconv.ParseUint(fields[0][len("id="):], 10, 64)
	if err != nil {
		return err
	}
	s.Serial, s.Accepted = serial, at
	if len(fields) == 3 {
		src, ok := strings.CutPrefix(fields[2], "source=")
		if !ok {
			return fmt.Errorf("unexpected header field %.80q", fields[2])
		}
		s.Client = src
	}
	return nil
}

// parseSessionLine reads the fields wanted from one indented line of a block
// into b and returns the line's rank, or -1 for a line not needed.
func parseSessionLine(line string, b *streamBlock) (int, error) {
	key, rest, ok := strings.Cut(strings.TrimLeft(line, " "), "=")
	// Every wanted line is indented by exactly two spaces; the continuation
	// lines (an_exp=, buf=, co0=, iobuf.flags=…) by four or six.
	if !ok || !strings.HasPrefix(line, "  ") || strings.HasPrefix(line, "   ") {
		return -1, nil
	}
	switch key {
	case "frontend", "backend", "server":
		return parseNameLine(key, rest, b)
	case "task":
		age, ok := fieldValue(rest, "age=")
		if !ok {
			return 0, fmt.Errorf("no age in %.80q", line)
		}
		d, res, err := parseHumanTime(age)
		if err != nil {
			return 0, err
		}
		b.coarse = [2]time.Duration{d, res}
		return lineTask, nil
	case "scf", "scb":
		// in= is there from 3.4 on; before, -1 says "not printed".
		n, err := byteCount(key, rest, "in=")
		if key == "scf" {
			b.scfIn = n
			return lineSCF, err
		}
		b.scbIn = n
		return lineSCB, err
	case "req", "res":
		// total= is there up to 3.2.
		n, err := byteCount(key, rest, "total=")
		if key == "req" {
			b.reqTotal = n
			return lineReq, err
		}
		b.resTotal = n
		return lineRes, err
	}
	return -1, nil
}

// parseNameLine reads a frontend, backend or server line: the name, and
// for a frontend whether it is one of HAProxy's internal proxies.
func parseNameLine(key, rest string, b *streamBlock) (int, error) {
	word, _, _ := strings.Cut(rest, " ")
	if key == "server" && word == "(null)" {
		// An unnamed server: Lua's socket server (2.6 to 3.4 print
		// its NULL name so). check accepts it on an internal proxy only.
		b.nullServer = true
		return lineServer, nil
	}
	name, err := proxyName(key, word)
	if err != nil {
		return 0, err
	}
	switch key {
	case "frontend":
		b.s.Frontend = name
		if id, ok := fieldValue(rest, "id="); ok && id == internalProxyID {
			b.s.Internal = true
		}
		return lineFrontend, nil
	case "backend":
		b.s.Backend = name
		return lineBackend, nil
	}
	b.s.Server = name
	return lineServer, nil
}

// byteCount reads the byte count field (`total=`, `in=`) of a line; a field
// not printed gives -1 (check then looks for the other layout's).
func byteCount(key, rest, field string) (int64, error) {
	v, ok := fieldValue(rest, field)
	if !ok {
		return -1, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return -1, fmt.Errorf("%s %s%q is not a byte count", key, field, v)
	}
	return n, nil
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
