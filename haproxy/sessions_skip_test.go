package haproxy

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestParseSessionDumpSkipsUnreadableStream: one stream the parser cannot
// read is left out and counted, with the reason, and the others are read;
// a dump in which most streams are unreadable is refused as a whole.
func TestParseSessionDumpSkipsUnreadableStream(t *testing.T) {
	a := block("0x1a", 1, "127.0.0.1:1000", "fe", "be", "s1", "3s", 10, 20)
	b := block("0x2b", 2, "127.0.0.1:2000", "fe", "be", "s2", "1m2s", 30, 40)
	c := block("0x3c", 3, "127.0.0.1:3000", "fe", "be", "s1", "0s", 50, 60)
	for _, tc := range []struct {
		name, bad, why string
	}{
		{"total not a number", strings.Replace(b, "total=30)", "total=3x0)", 1), "not a byte count"},
		{"no byte counts", strings.Replace(b, " total=30)", ")", 1), "no byte counts"},
		{"(null) server on a configured proxy", strings.Replace(b, "server=s2 ", "server=(null) ", 1), "not one of HAProxy's internal proxies"},
		{"impossible server name", strings.Replace(b, "server=s2 ", "server=s/2 ", 1), "invalid server name"},
		{"bad header", strings.Replace(b, "0x2b: [", "0x2b: [99/", 1), "accept date"},
		{"unknown header fields", strings.Replace(b, " proto=tcpv4", " proto=tcpv4 x=1 y=2", 1), "unexpected header fields"},
		{"task line missing", strings.Replace(b, "  task=", "  xtask=", 1), "no task line"},
		{"bad age", strings.Replace(b, "age=1m2s)", "age=2s1m)", 1), "bad age"},
		{"server line twice", strings.Replace(b, "  task=", "  server=s9 (id=9)\n  task=", 1), "out of place"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := parseSessionDump(strings.NewReader(a+tc.bad+c+"\n"), maxSessionDump, nil)
			require.NoError(t, err)
			var got []string
			for _, s := range d.sessions {
				got = append(got, s.ID+"/"+s.Server)
			}
			assert.Equal(t, []string{"0x1a/s1", "0x3c/s1"}, got)
			assert.Equal(t, 2, d.streams)
			assert.Equal(t, 1, d.skipped)
			require.Error(t, d.skipErr)
			assert.Contains(t, d.skipErr.Error(), tc.why)
			assert.Contains(t, d.skipErr.Error(), "0x2b", "the reason names the stream")

			// The same stream alone, or with as many unreadable as
			// readable ones around it, is a dump this parser does not know.
			for _, dump := range []string{tc.bad, tc.bad + a + tc.bad} {
				_, err = parseSessionDump(strings.NewReader(dump+"\n"), maxSessionDump, nil)
				require.ErrorIs(t, err, ErrBadReply)
				assert.Contains(t, err.Error(), "streams unreadable")
				assert.Contains(t, err.Error(), tc.why)
			}
		})
	}
}

// TestParseSessionDumpLostHeaderAmongOthers: two blocks run together (a lost
// header) are one unreadable block, skipped: neither stream is given the
// other's server, and the streams around them are read.
func TestParseSessionDumpLostHeaderAmongOthers(t *testing.T) {
	a := block("0x1a", 1, "127.0.0.1:1000", "fe", "be", "s1", "3s", 10, 20)
	b := block("0x2b", 2, "127.0.0.1:2000", "fe", "be", "s2", "1m2s", 30, 40)
	c := block("0x3c", 3, "127.0.0.1:3000", "fe", "be", "s1", "0s", 50, 60)
	e := block("0x4d", 4, "127.0.0.1:4000", "fe", "be", "s2", "0s", 70, 80)
	d, err := parseSessionDump(strings.NewReader(a+c+strings.SplitAfterN(b, "\n", 2)[1]+e+"\n"), maxSessionDump, nil)
	require.NoError(t, err)
	var got []string
	for _, s := range d.sessions {
		got = append(got, s.ID+"/"+s.Server)
	}
	assert.Equal(t, []string{"0x1a/s1", "0x4d/s2"}, got)
	assert.Equal(t, 1, d.skipped)
	assert.Contains(t, d.skipErr.Error(), "out of place")
}

// TestParseSessionDumpInternalStreams: streams of HAProxy's internal proxies
// (proxy id 4294967295) are read and marked Internal; a Lua socket's
// "(null)" server is no server.
func TestParseSessionDumpInternalStreams(t *testing.T) {
	lua := strings.NewReplacer("frontend=fe (id=2", "frontend=LUA-SOCKET (id=4294967295",
		"backend=be (id=4", "backend=LUA-SOCKET (id=4294967295", "server=s1 (id=1)", "server=(null) (id=0)").
		Replace(block("0x1a", 1, "127.0.0.1:1000", "fe", "be", "s1", "3s", 10, 0))
	http := strings.NewReplacer("frontend=<HTTPCLIENT> (id=2", "frontend=<HTTPCLIENT> (id=4294967295").
		Replace(block("0x2b", 2, "127.0.0.1:2000", "<HTTPCLIENT>", "<HTTPCLIENT>", "<HTTPCLIENT>", "0s", 5, 0))
	ours := block("0x3c", 3, "127.0.0.1:3000", "fe", "be", "s1", "0s", 50, 60)
	d, err := parseDump(lua + http + ours + "\n")
	require.NoError(t, err)
	require.Len(t, d.sessions, 3)
	assert.Zero(t, d.skipped)
	assert.Equal(t, Session{ID: "0x1a", Serial: 1, Frontend: "LUA-SOCKET", Backend: "LUA-SOCKET", Server: "",
		Client: "127.0.0.1:1000", Accepted: d.sessions[0].Accepted, Age: d.sessions[0].Age, ReqBytes: 10, Internal: true}, d.sessions[0])
	assert.True(t, d.sessions[1].Internal)
	assert.Equal(t, "<HTTPCLIENT>", d.sessions[1].Server)
	assert.False(t, d.sessions[2].Internal)
}
