package haproxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// The pin table is the backend's own stick table (`stick-table type ip|ipv6
// … ` in the backend, `stick match src`), read with `show table` and written
// with `set table <be> key <ip> data.server_id <id>` and `clear table <be>
// key <ip>`. What HAProxy does with it, measured on Debian's 2.6.12, 3.0.11,
// 3.2.26 and 3.4.7:
//
//   - A FULL table refuses nothing: `set table` of a new key when `used` is
//     `size` answers nothing (no error, no notice), stores the new key and
//     makes room by evicting entries (use=0) that HAProxy picks: given a
//     third pin, a `size 2` table lost its oldest entry on 2.6, one of the
//     two (not always the oldest) on 3.0 and 3.4, and both on 3.2 (used 1
//     of 2 after, so Used == Size does not even show it there). A full
//     table thus silently drops other clients' pins. As HAProxy does not
//     say so, SetWeightsAndPins counts the table just before its `set
//     table` commands (its header, in the same batch) and returns an error
//     wrapping weighter.ErrPinTableFull when the new pins may not have
//     fitted; Pins reports Used and Size.
//   - A key is parsed loosely by 2.6 and silently stored wrong: "1.2.3"
//     becomes 1.2.3.0 and "::ffff:127.0.0.10" 0.0.0.0 in a `type ip` table,
//     an IPv4 address in a `type ipv6` table is "Invalid key" on 2.6 (3.x
//     takes both forms and converts). So every key is checked here and
//     written in the table's own form: dotted IPv4 in a `type ip` table
//     (an IPv6 client cannot be pinned there), IPv6 in a `type ipv6` one
//     (an IPv4 client as ::ffff:a.b.c.d, which is how HAProxy keys an IPv4
//     source in such a table). `show table` prints keys that way; Pins
//     hands IPv4-mapped keys back as plain IPv4, the fast signal's form.
//   - `set table` of a server_id no server has is taken (the entry is then
//     ignored by HAProxy); Pins lists such entries in Stray.
//   - A pin to a server in MAINT is not followed: the client is balanced
//     over the other servers (with or without `option redispatch`), and the
//     entry stays, followed again once the server is enabled. A pin beats
//     drain and weight 0 (the client still goes there).

// maxPinEntries caps how many entries Pins reads of a table: the daemon's
// pins are at most a few thousand, and a table of 100,000 entries (~9 MB of
// `show table`) must not be read whole each cycle. Entries past it are not
// read (the dump is cut, which HAProxy takes as a client that left);
// PinTable.Used still counts them.
const maxPinEntries = 10_000

// maxTableLine bounds one line of `show table`: an entry with many stored
// counters is a few hundred bytes.
const maxTableLine = 64 << 10

var _ weighter.PinTarget = (*RuntimeBackend)(nil)

// tableInfo is one line of `show table`: "# table: be, type: ip, size:102400, used:1".
type tableInfo struct {
	name, typ  string
	size, used int
}

// parseTableHeader reads a `show table` header line.
func parseTableHeader(line string) (tableInfo, bool) {
	rest, ok := strings.CutPrefix(line, "# table: ")
	if !ok {
		return tableInfo{}, false
	}
	var t tableInfo
	for i, f := range strings.Split(rest, ",") {
		f = strings.TrimSpace(f)
		if i == 0 {
			t.name = f
			continue
		}
		k, v, ok := strings.Cut(f, ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		switch strings.TrimSpace(k) {
		case "type":
			t.typ = v
		case "size":
			t.size, _ = strconv.Atoi(v)
		case "used":
			t.used, _ = strconv.Atoi(v)
		}
	}
	return t, t.name != "" && t.typ != ""
}

// findTable picks the backend's own table out of the reply to `show table`.
func findTable(backend, reply string) (tableInfo, error) {
	if err := commandError(reply); err != nil {
		return tableInfo{}, fmt.Errorf("show table: %w", err)
	}
	for line := range strings.SplitSeq(reply, "\n") {
		t, ok := parseTableHeader(line)
		if !ok || t.name != backend {
			continue
		}
		if t.typ != "ip" && t.typ != "ipv6" {
			return t, fmt.Errorf("%w: backend %s's stick table is of type %s; pins need `stick-table type ip` (or ipv6) and `stick match src`",
				weighter.ErrNoPinTable, backend, t.typ)
		}
		return t, nil
	}
	return tableInfo{}, fmt.Errorf("%w: backend %s has no stick table; add `stick-table type ip size 100k expire 2h` and `stick match src` to it",
		weighter.ErrNoPinTable, backend)
}

// scanServerIDs reads srv_id and srv_name of a `show servers state` reply
// that parseServersState took.
func scanServerIDs(reply string) map[int]string {
	ids := make(map[int]string)
	for line := range strings.SplitSeq(reply, "\n") {
		f := strings.Fields(line)
		if len(f) < minStateCols || strings.HasPrefix(line, "#") {
			continue
		}
		if id, err := strconv.Atoi(f[colID]); err == nil {
			ids[id] = f[colName]
		}
	}
	return ids
}

// colID is srv_id in `show servers state`.
const colID = 2

// keepIDs remembers the backend's server ids and its table's type, which
// SetWeightsAndPins writes with.
func (b *RuntimeBackend) keepIDs(ids map[int]string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.serverIDs = ids
}

// noTableRecheck is how long a backend found without a pin table is taken
// to have none: a reload that adds the table is seen within it.
const noTableRecheck = time.Minute

// knownNoTable returns the last "no pin table" answer while it stands.
func (b *RuntimeBackend) knownNoTable() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.noTable != nil && b.now().Before(b.noTableUntil) {
		return b.noTable
	}
	return nil
}

// keepNoTable records that the backend has no pin table, as of now.
func (b *RuntimeBackend) keepNoTable(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.noTable, b.noTableUntil = err, b.now().Add(noTableRecheck)
}

func (b *RuntimeBackend) keepTableType(typ string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tableType = typ
}

// Pins reads the backend's pin table: `show table` finds the backend's own
// table (none, or one not keyed on an address, is an error wrapping
// weighter.ErrNoPinTable), `show servers state` names each entry's server,
// and `show table <be>` is read up to maxPinEntries entries.
func (b *RuntimeBackend) Pins(ctx context.Context) (weighter.PinTable, error) {
	if err := checkName("backend", b.name); err != nil {
		return weighter.PinTable{}, err
	}
	if err := b.knownNoTable(); err != nil {
		return weighter.PinTable{}, err
	}
	replies, err := b.c.roundTrip(ctx, []string{"show table", b.stateCmd()})
	if err != nil {
		return weighter.PinTable{}, fmt.Errorf("backend %s: pins: %w", b.name, err)
	}
	if err := commandError(replies[1]); err != nil {
		return weighter.PinTable{}, fmt.Errorf("backend %s: pins: %w", b.name, classify(err))
	}
	info, err := findTable(b.name, replies[0])
	if err != nil {
		if errors.Is(err, weighter.ErrNoPinTable) {
			b.keepNoTable(err)
		}
		return weighter.PinTable{}, err
	}
	b.keepTableType(info.typ)
	if _, err := b.parseState(replies[1]); err != nil {
		return weighter.PinTable{}, err
	}
	ids := scanServerIDs(replies[1])
	b.keepIDs(ids)
	t, err := b.dumpTable(ctx, ids)
	if err != nil {
		return weighter.PinTable{}, fmt.Errorf("backend %s: pins: %w", b.name, err)
	}
	return t, nil
}

// dumpTable reads `show table <be>` as it arrives, in HAProxy's one-command
// mode (the reply ends when HAProxy closes), and stops after maxPinEntries
// entries.
func (b *RuntimeBackend) dumpTable(ctx context.Context, ids map[int]string) (weighter.PinTable, error) {
	c := b.c
	cmd := "show table " + b.name
	if c.trace != nil {
		c.trace([]string{cmd})
	}
	conn, err := c.dial(ctx)
	if err != nil {
		c.noteHealth(ctx, err)
		return weighter.PinTable{}, err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if _, err := io.WriteString(conn, c.oneCommand(cmd)); err != nil {
		err = c.ioError(ctx, "write", err)
		c.noteHealth(ctx, err)
		return weighter.PinTable{}, err
	}
	r := &pushReader{r: conn, push: func() { c.push(ctx, conn.SetReadDeadline) }}
	t, err := parseTableDump(b.name, r, ids, maxPinEntries)
	var msg haproxyMessage
	if err != nil && !errors.As(err, &msg) && !errors.Is(err, ErrBadReply) {
		err = c.ioError(ctx, "read", err)
	}
	c.noteHealth(ctx, err)
	return t, err
}

// parseTableDump parses a `show table <be>` reply: its header, then one line
// an entry ("0x…: key=10.0.0.1 use=0 exp=7199604 [shard=0] server_id=3
// server_key=-", 3.0 on adding shard=), up to limit entries.
func parseTableDump(backend string, r io.Reader, ids map[int]string, limit int) (weighter.PinTable, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxTableLine)
	t := weighter.PinTable{Name: backend, Pins: []weighter.Pin{}}
	header := false
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if header {
				break // the dump's end
			}
			continue
		}
		if !header {
			info, ok := parseTableHeader(line)
			switch {
			case ok && info.name == backend:
				t.Size, t.Used, header = info.size, info.used, true
				continue
			case ok:
				return t, fmt.Errorf("%w: show table %s: header of table %s", ErrBadReply, backend, info.name)
			}
			if msg, _, ok := severity(line); ok {
				return t, haproxyMessage(msg)
			}
			return t, haproxyMessage(strings.TrimSpace(line))
		}
		if len(t.Pins)+len(t.Stray) >= limit {
			return t, nil // the cap: the rest is not read
		}
		key, id, err := parseTableEntry(line)
		if err != nil {
			return t, fmt.Errorf("%w: show table %s: %w (%.120q)", ErrBadReply, backend, err, line)
		}
		if name, ok := ids[id]; ok && id > 0 {
			t.Pins = append(t.Pins, weighter.Pin{Client: key, Server: name})
		} else {
			t.Stray = append(t.Stray, key)
		}
	}
	if err := sc.Err(); err != nil {
		return t, err
	}
	if !header {
		return t, fmt.Errorf("%w: show table %s: no header", ErrBadReply, backend)
	}
	return t, nil
}

// parseTableEntry reads an entry's key (an IPv4-mapped one as IPv4) and
// server_id (0 when the entry has none: a table that stores no server_id
// cannot pin, and its entries name no server).
func parseTableEntry(line string) (string, int, error) {
	f := strings.Fields(line)
	if len(f) < 2 || !strings.HasPrefix(f[0], "0x") || !strings.HasSuffix(f[0], ":") {
		return "", 0, errors.New("not an entry")
	}
	var key string
	id := 0
	for _, kv := range f[1:] {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "key":
			key = v
		case "server_id":
			n, err := strconv.Atoi(v)
			if err != nil {
				return "", 0, fmt.Errorf("server_id %q", v)
			}
			id = n
		}
	}
	addr, err := netip.ParseAddr(key)
	if err != nil {
		return "", 0, fmt.Errorf("key %q is not an address", key)
	}
	return addr.Unmap().String(), id, nil
}

// pinKey is how client is written as a key of a table of type typ, or why
// it cannot be: not an IP address, or an IPv6 one for a `type ip` table.
func pinKey(typ, client string) (string, error) {
	addr, err := netip.ParseAddr(client)
	if err != nil || addr.Zone() != "" {
		return "", fmt.Errorf("%q is not an IP address", client)
	}
	addr = addr.Unmap()
	switch {
	case typ == "ip" && !addr.Is4():
		return "", fmt.Errorf("an IPv6 client cannot be pinned in a stick table of type ip (make it type ipv6)")
	case typ == "ip":
		return addr.String(), nil
	case addr.Is4():
		return "::ffff:" + addr.String(), nil
	}
	return addr.String(), nil
}
