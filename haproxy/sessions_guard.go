package haproxy

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// HAProxy 3.0.11 (Debian 13) crashes (SIGSEGV, "segfault at 0") on `show sess
// all`, and on `show sess <id>` of the stream, as soon as a Lua task's
// core.tcp() socket has a stream; the short `show sess` and `show sess <id>`
// of any other stream do not crash it. 2.6.12, 3.2.26 and 3.4.7 do not crash
// (docs/research/haproxy-stream-counters.md has the reproduction). The branches between
// 2.6 and 3.2 that were not tried (2.7 to 3.1) are treated like 3.0.
//
// On such a version the reader asks the short `show sess` first, and sends
// the full dump only when it lists no stream without a frontend connection
// ("proto=?": a Lua socket's, or the HTTP client's, which the short form does
// not tell apart). Otherwise it sends nothing more, and the read fails with
// ErrStreamDumpUnsafe for that cycle. A Lua socket opened between the two
// commands is the risk left: on 3.0 a task's closed socket lingers as a
// stream until its next connect, so a task that uses sockets was listed in
// every one of 2,000 checks tried.

// ErrStreamDumpUnsafe: the running HAProxy version crashes on `show sess all`
// while a Lua socket stream exists, and one may exist: the dump was not sent.
var ErrStreamDumpUnsafe = errors.New("stream dump not sent: this HAProxy version crashes on it while a Lua socket stream exists")

// haproxyInfo is what the dump guard reads of `show info`.
type haproxyInfo struct {
	Version      string // as HAProxy prints it: "3.0.11-1+deb13u4"
	major, minor int
	patch        string // "11"; "" for a development version ("3.4-dev2")
}

// infoVersion matches show info's Version: 2.6.12-1+deb12u3, 3.4.7-1, 3.4-dev2.
var infoVersion = regexp.MustCompile(`^(\d+)\.(\d+)(?:\.(\d+))?`)

// parseInfo reads the Version line of a `show info` reply.
func parseInfo(reply string) (haproxyInfo, error) {
	for line := range strings.SplitSeq(reply, "\n") {
		v, ok := strings.CutPrefix(line, "Version: ")
		if !ok {
			continue
		}
		m := infoVersion.FindStringSubmatch(v)
		if m == nil {
			return haproxyInfo{Version: v}, fmt.Errorf("%w: show info: version %.40q", ErrBadReply, v)
		}
		major, _ := strconv.Atoi(m[1])
		minor, _ := strconv.Atoi(m[2])
		return haproxyInfo{Version: v, major: major, minor: minor, patch: m[3]}, nil
	}
	return haproxyInfo{}, fmt.Errorf("%w: show info: no Version line (%.80q)", ErrBadReply, reply)
}

// release is the version without Debian's suffix: "3.0.11".
func (i haproxyInfo) release() string {
	if i.patch == "" {
		return fmt.Sprintf("%d.%d", i.major, i.minor)
	}
	return fmt.Sprintf("%d.%d.%s", i.major, i.minor, i.patch)
}

// crashesOnLuaStreamDump reports whether the version may crash on a full
// dump of a Lua socket's stream: 3.0 measured, 2.7 to 3.1 not tried.
func (i haproxyInfo) crashesOnLuaStreamDump() bool {
	v := i.major*100 + i.minor
	return v >= 207 && v < 302
}

// appletStreams counts the streams a short `show sess` lists without a
// frontend connection ("0x…: proto=? ts=…", no src= or fe=): Lua sockets'
// and the HTTP client's, on 2.6 to 3.4.
func appletStreams(short string) int {
	n := 0
	for line := range strings.SplitSeq(short, "\n") {
		if isAppletLine(line) {
			n++
		}
	}
	return n
}

func isAppletLine(line string) bool {
	id, rest, ok := strings.Cut(line, ": ")
	return ok && isSessionID(id) && strings.HasPrefix(rest, "proto=? ") && !strings.Contains(rest, " fe=")
}

// checkDumpSafe is asked before cmd (`show sess all` or `show sess <id>`):
// nil when the running HAProxy can be sent it, an error wrapping
// ErrStreamDumpUnsafe when it may crash on it. One `show info` on every
// version (a restart may have changed it), and the short `show sess` on the
// versions that crash.
func (c *Client) checkDumpSafe(ctx context.Context, cmd string) error {
	replies, err := c.exchange(ctx, []string{"show info"})
	if err != nil {
		return fmt.Errorf("show info: %w", err)
	}
	info, err := parseInfo(replies[0])
	if err != nil {
		// A version not understood is taken as one that may crash.
		info = haproxyInfo{major: 3}
	}
	if !info.crashesOnLuaStreamDump() {
		return nil
	}
	replies, err = c.exchange(ctx, []string{"show sess"})
	if err != nil {
		return fmt.Errorf("show sess: %w", err)
	}
	// `show sess <id>` crashes only on that stream; any other form (`all`,
	// 3.4's `all backend <b>`…) may dump every stream.
	if id, one := strings.CutPrefix(cmd, "show sess "); one && isSessionID(id) {
		for line := range strings.SplitSeq(replies[0], "\n") {
			if strings.HasPrefix(line, id+": ") && isAppletLine(line) {
				return fmt.Errorf("%w: HAProxy %s: stream %s has no frontend connection (a Lua socket's?)", ErrStreamDumpUnsafe, info.Version, id)
			}
		}
		return nil
	}
	if n := appletStreams(replies[0]); n > 0 {
		return fmt.Errorf("%w: HAProxy %s: `show sess` lists %d stream(s) without a frontend connection (a Lua socket's or the HTTP client's)",
			ErrStreamDumpUnsafe, info.Version, n)
	}
	return nil
}
