package haproxy

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// capturedDump is the committed real dump (see testdata/README.md).
func capturedDump(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(streamDumpFile)
	require.NoError(t, err)
	return string(b)
}

func parseDump(s string) (sessionDump, error) {
	return parseSessionDump(strings.NewReader(s), maxSessionDump, nil)
}

// block is a stream block as HAProxy 2.6 prints it, with the values that
// matter as parameters.
func block(id string, serial int, src, fe, be, srv, age string, req, res int64) string {
	return fmt.Sprintf(`%s: [01/Dec/2026:16:52:16.520930] id=%d proto=tcpv4 source=%s
  flags=0x4a, conn_retries=0, conn_exp=<NEVER> conn_et=0x000 srv_conn=0x561cd2009640, pend_pos=(nil) waiting=0 epoch=0
  frontend=%s (id=2 mode=tcp), listener=? (id=1) addr=127.0.0.1:18401
  backend=%s (id=4 mode=tcp) addr=127.0.0.1:45386
  server=%s (id=1) addr=127.0.0.1:18411
  task=0x561cd21ebef0 (state=0x00 nice=0 calls=2 rate=0 exp=1s tmask=0x1 age=%s)
  scf=0x561cd218e070 flags=0x00000000 state=EST endp=CONN,0x561cd21ebfc0,0x028c0001 sub=1
      co0=0x7fc0ec0426f0 ctrl=tcpv4 xprt=RAW mux=PASS data=STRM target=LISTENER:0x561cd2005940
      flags=0x00000300 fd=13 fd.state=21 updt=0 fd.tmask=0x1
  scb=0x561cd2132ed0 flags=0x00000001 state=EST endp=CONN,0x561cd21ed750,0x028c0001 sub=1
      co1=0x561cd21ec110 ctrl=tcpv4 xprt=RAW mux=PASS data=STRM target=SERVER:0x561cd2009640
      flags=0x10000300 fd=21 fd.state=10421 updt=0 fd.tmask=0x1
  req=0x561cd20cdde0 (f=0x848000 an=0x0 pipe=0 tofwd=-1 total=%d)
      an_exp=<NEVER> rex=29s wex=<NEVER>
      buf=0x561cd20cdde8 data=(nil) o=0 p=0 i=0 size=0
  res=0x561cd20cde40 (f=0x80008000 an=0x0 pipe=0 tofwd=-1 total=%d)
      an_exp=<NEVER> rex=29s wex=<NEVER>
      buf=0x561cd20cde48 data=(nil) o=0 p=0 i=0 size=0
`, id, serial, src, fe, be, srv, age, req, res)
}

const tornLine = "  *** session terminated while we were watching it ***\n"

func TestParseSessionDumpCaptured(t *testing.T) {
	d, err := parseDump(capturedDump(t))
	require.NoError(t, err)
	assert.Equal(t, 4, d.streams, "three client streams and the CLI's own")
	assert.Equal(t, 4, len(d.sessions))
	assert.Equal(t, int64(len(capturedDump(t))), d.bytes)
	assert.Zero(t, d.torn)
	var cli int
	for _, s := range d.sessions {
		if s.Frontend == cliFrontend {
			cli++
			assert.Equal(t, "", s.Backend)
			assert.Equal(t, "", s.Server)
			assert.Equal(t, "unix:1", s.Client)
			_, ok := s.ClientAddr()
			assert.False(t, ok)
		}
	}
	assert.Equal(t, 1, cli)
}

// TestParseSessionDumpTruncated cuts the real dump at every byte: a dump cut
// short anywhere is an error, never a shorter list.
func TestParseSessionDumpTruncated(t *testing.T) {
	full := capturedDump(t)
	for i := range len(full) {
		_, err := parseDump(full[:i])
		require.ErrorIs(t, err, ErrBadReply, "cut at %d of %d", i, len(full))
	}
}

func TestParseSessionDump(t *testing.T) {
	a := block("0x1a", 1, "127.0.0.1:1000", "fe", "be", "s1", "3s", 10, 20)
	b := block("0x2b", 2, "127.0.0.1:2000", "fe", "be", "s2", "1m2s", 30, 40)
	other := block("0x3c", 3, "10.0.0.1:3000", "fe2", "be2", "t1", "0s", 0, 0)
	for _, tc := range []struct {
		name    string
		dump    string
		servers []string // of the kept streams, "id/server"
		torn    int
		err     string // substring; "" for none
	}{
		{name: "empty dump", dump: "\n"},
		{name: "two streams", dump: a + b + "\n", servers: []string{"0x1a/s1", "0x2b/s2"}},
		{name: "other backend skipped", dump: a + other + b + "\n", servers: []string{"0x1a/s1", "0x2b/s2"}},
		{name: "torn line after a whole block keeps it", dump: a + tornLine + b + "\n",
			servers: []string{"0x1a/s1", "0x2b/s2"}, torn: 1},
		{name: "torn first", dump: tornLine + a + "\n", servers: []string{"0x1a/s1"}, torn: 1},
		{name: "torn after a partial block drops it",
			dump:    a + strings.Join(strings.SplitAfter(b, "\n")[:6], "") + tornLine + "\n",
			servers: []string{"0x1a/s1"}, torn: 1},
		{name: "reused address: the later entry wins",
			dump:    a + strings.Replace(b, "0x2b", "0x1a", 1) + "\n",
			servers: []string{"0x1a/s2"}},
		{name: "reused address, later on another backend: neither is kept",
			dump:    a + strings.Replace(other, "0x3c", "0x1a", 1) + b + "\n",
			servers: []string{"0x2b/s2"}},
		{name: "server not chosen yet", dump: block("0x1a", 1, "127.0.0.1:1", "fe", "be", "<none>", "0s", 0, 0) + "\n",
			servers: []string{"0x1a/"}},
		{name: "ipv6 source", dump: block("0x1a", 1, "::1:4000", "fe", "be", "s1", "0s", 0, 0) + "\n",
			servers: []string{"0x1a/s1"}},
		{name: "no end line", dump: a + b, err: "cut short"},
		{name: "data after the end", dump: a + "\n" + b, err: "after the end"},
		{name: "lost header merges two blocks", dump: a + strings.SplitAfterN(b, "\n", 2)[1] + "\n", err: "out of place"},
		{name: "server line missing", dump: strings.Replace(a, "  server=s1", "  xserver=s1", 1) + "\n", err: "no server line"},
		{name: "server line twice", dump: strings.Replace(a, "  task=", "  server=s9 (id=9)\n  task=", 1) + "\n", err: "out of place"},
		{name: "total not a number", dump: strings.Replace(a, "total=10)", "total=1x0)", 1) + "\n", err: "not a byte count"},
		{name: "negative total", dump: strings.Replace(a, "total=10)", "total=-10)", 1) + "\n", err: "not a byte count"},
		{name: "no total", dump: strings.Replace(a, " total=10)", ")", 1) + "\n", err: "no byte counts"},
		{name: "bad age", dump: strings.Replace(a, "age=3s)", "age=3x)", 1) + "\n", err: "bad age"},
		{name: "bad header", dump: "0xzz: [01/Dec/2026:16:52:16.520930] id=1 proto=tcpv4\n\n", err: "bad stream header"},
		{name: "bad date", dump: strings.Replace(a, "01/Dec/2026", "41/Dec/2026", 1) + "\n", err: "accept date"},
		{name: "garbage", dump: "\x00\x01\x02garbage\n\n", err: "not a stream"},
		{name: "indented line before any header", dump: "  server=s1 (id=1)\n\n", err: "not a stream"},
		{name: "text then more text", dump: "Unknown command.\nmore\n\n", err: "not a stream"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := parseSessionDump(strings.NewReader(tc.dump), maxSessionDump,
				func(s *Session) bool { return s.Backend == "be" })
			if tc.err != "" {
				require.ErrorIs(t, err, ErrBadReply)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			var got []string
			for _, s := range d.sessions {
				got = append(got, s.ID+"/"+s.Server)
			}
			assert.Equal(t, tc.servers, got)
			assert.Equal(t, tc.torn, d.torn)
		})
	}
}

func TestParseSessionDumpFields(t *testing.T) {
	d, err := parseDump(block("0x7fc0ec042dc0", 42, "::1:4000", "fe", "be", "s1", "1m2s", 1234, 5678) + "\n")
	require.NoError(t, err)
	require.Len(t, d.sessions, 1)
	s := d.sessions[0]
	assert.Equal(t, Session{ID: "0x7fc0ec042dc0", Serial: 42, Frontend: "fe", Backend: "be", Server: "s1",
		Client: "::1:4000", Accepted: time.Date(2026, 12, 1, 16, 52, 16, 520930000, time.UTC),
		Age: 62 * time.Second, ReqBytes: 1234, ResBytes: 5678}, s)
	addr, ok := s.ClientAddr()
	require.True(t, ok)
	assert.Equal(t, netip.MustParseAddrPort("[::1]:4000"), addr)
}

// TestParseSessionDumpAge: the CLI's own stream gives the dump's "now" in
// HAProxy's clock, and with it ages to the microsecond.
func TestParseSessionDumpAge(t *testing.T) {
	stream := block("0x1a", 1, "127.0.0.1:1000", "fe", "be", "s1", "3s", 0, 0)
	cli := strings.Replace(block("0x2b", 2, "unix:1", cliFrontend, "<NONE>", "<NONE>", "0s", 0, 0),
		"16:52:16.520930", "16:52:19.770930", 1)
	d, err := parseDump(stream + cli + "\n")
	require.NoError(t, err)
	assert.Equal(t, 3250*time.Millisecond, d.sessions[0].Age)
	assert.Equal(t, time.Duration(0), d.sessions[1].Age)

	// A CLI accept that disagrees with HAProxy's own age (a clock or time
	// zone change) is not trusted.
	cli = strings.Replace(cli, "16:52:19", "17:52:19", 1)
	d, err = parseDump(stream + cli + "\n")
	require.NoError(t, err)
	assert.Equal(t, 3*time.Second, d.sessions[0].Age)
}

func TestParseHumanTime(t *testing.T) {
	for _, tc := range []struct {
		in       string
		d, res   time.Duration
		wantFail bool
	}{
		{in: "0s", res: time.Second},
		{in: "59s", d: 59 * time.Second, res: time.Second},
		{in: "2m3s", d: 123 * time.Second, res: time.Second},
		{in: "2m", d: 2 * time.Minute, res: time.Minute},
		{in: "1h5m", d: 65 * time.Minute, res: time.Minute},
		{in: "1h7s", d: time.Hour + 7*time.Second, res: time.Second},
		{in: "3d4h", d: 76 * time.Hour, res: time.Hour},
		{in: "24855d23h", d: (24855*24 + 23) * time.Hour, res: time.Hour},
		{in: "?", res: time.Second},
		{in: "", wantFail: true},
		{in: "5", wantFail: true},
		{in: "s", wantFail: true},
		{in: "1s2m", wantFail: true},
		{in: "1h2m3s", wantFail: true},
		{in: "1x", wantFail: true},
		{in: "1m1m", wantFail: true},
		{in: "9999999999s", wantFail: true},
	} {
		d, res, err := parseHumanTime(tc.in)
		if tc.wantFail {
			assert.Error(t, err, tc.in)
			continue
		}
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.d, d, tc.in)
		assert.Equal(t, tc.res, res, tc.in)
	}
}

func TestIsSessionID(t *testing.T) {
	for id, want := range map[string]bool{
		"0x1": true, "0x7fc0ec042dc0": true, "0xffffffffffffffff": true,
		"": false, "0x": false, "0X1": false, "1": false, "0x1g": false, "0xAB": false,
		"0x1 ": false, "0x1;": false, "0x1\n": false, "0x10000000000000000": false, "all": false,
	} {
		assert.Equal(t, want, isSessionID(id), "%q", id)
	}
}

// TestParseSessionDumpLimits: a dump bigger than the bound, or a line longer
// than any HAProxy prints, is refused rather than read on.
func TestParseSessionDumpLimits(t *testing.T) {
	a := block("0x1a", 1, "127.0.0.1:1000", "fe", "be", "s1", "3s", 10, 20)
	_, err := parseSessionDump(strings.NewReader(strings.Repeat(a, 100)+"\n"), int64(len(a)*10), nil)
	require.ErrorIs(t, err, ErrBadReply)
	assert.Contains(t, err.Error(), "larger than")

	long := strings.Replace(a, "  flags=0x4a", "  flags="+strings.Repeat("x", maxSessionLine), 1)
	_, err = parseDump(long + "\n")
	require.ErrorIs(t, err, ErrBadReply)
	assert.Contains(t, err.Error(), "longer than")
}

// TestParseSessionDumpMessage: a one-line reply is HAProxy's text, which the
// shutdown path maps to ErrNoSession.
func TestParseSessionDumpMessage(t *testing.T) {
	_, err := parseDump("Session not found.\n\n")
	var msg haproxyMessage
	require.True(t, errors.As(err, &msg), "%v", err)
	assert.Equal(t, haproxyMessage("Session not found"), msg)
	assert.ErrorIs(t, sessionError(0, err), ErrNoSession)

	_, err = parseDump("Permission denied\n\n")
	require.True(t, errors.As(err, &msg))
	assert.NotErrorIs(t, sessionError(0, err), ErrNoSession)
}

// FuzzParseSessionDump feeds the parser mangled dumps. It must never panic,
// and whatever it returns must be what the input says: each stream's server
// is the one named in that stream's own block, its totals are non-negative.
//
//	go test ./haproxy -run '^$' -fuzz FuzzParseSessionDump -fuzztime 60s
func FuzzParseSessionDump(f *testing.F) {
	full := capturedDump(f)
	f.Add(full)
	// Every captured version's dumps, Lua socket streams included.
	seeds, err := filepath.Glob("testdata/show-sess-all-*.txt")
	require.NoError(f, err)
	for _, path := range seeds {
		b, err := os.ReadFile(path)
		require.NoError(f, err)
		f.Add(string(b))
	}
	f.Add(full[:len(full)/2])
	f.Add(full + full)
	a := block("0x1a", 1, "127.0.0.1:1000", "fe", "be", "s1", "3s", 10, 20)
	b := block("0x2b", 2, "127.0.0.1:2000", "fe", "be", "s2", "1m2s", 30, 40)
	f.Add(a + tornLine + b + "\n")
	f.Add(a + strings.SplitAfterN(b, "\n", 2)[1] + "\n")
	f.Add("Session not found.\n\n")
	f.Add("\n")
	f.Fuzz(func(t *testing.T, dump string) {
		d, err := parseSessionDump(strings.NewReader(dump), 1<<20, nil)
		if err != nil {
			return
		}
		if d.bytes != int64(len(dump)) {
			t.Fatalf("read %d of %d bytes without error", d.bytes, len(dump))
		}
		if !strings.HasSuffix(dump, "\n") {
			t.Fatalf("accepted a dump without its end line")
		}
		for _, s := range d.sessions {
			if !isSessionID(s.ID) || s.ReqBytes < 0 || s.ResBytes < 0 || s.Age < 0 {
				t.Fatalf("bad session %+v", s)
			}
			// The last block headed by s.ID, up to the next header.
			i := strings.LastIndex("\n"+dump, "\n"+s.ID+": [")
			if i < 0 {
				t.Fatalf("session %s not headed in the input", s.ID)
			}
			own := dump[i:]
			if j := strings.Index(own[1:], "\n0x"); j >= 0 {
				own = own[:j+1]
			}
			srv := s.Server
			if srv == "" {
				srv = "<" // <NONE>, <none>
				if s.Internal && strings.Contains(own, "\n  server=(null) ") {
					srv = "(null)"
				}
			}
			if !strings.Contains(own, "\n  server="+srv) {
				t.Fatalf("session %s given server %q, not in its block:\n%s", s.ID, s.Server, own)
			}
		}
	})
}
