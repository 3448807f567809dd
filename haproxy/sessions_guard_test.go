package haproxy

import (
	"bufio"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDumpGuardVersions: which captured versions the guard treats as
// crashing on a Lua socket stream's dump, and what the short `show sess`
// shows of that stream on each.
func TestDumpGuardVersions(t *testing.T) {
	for _, v := range capturedVersions {
		b, err := os.ReadFile(filepath.Join("..", "testdata", "haproxy-"+v, "show-info.txt"))
		require.NoError(t, err)
		info, err := parseInfo(string(b))
		require.NoError(t, err)
		assert.Equal(t, crashesOnLuaDump[v], info.crashesOnLuaStreamDump(), v)

		b, err = os.ReadFile(filepath.Join("testdata", "show-sess-lua-"+v+".txt"))
		require.NoError(t, err)
		assert.Equal(t, 1, appletStreams(string(b)), "%s: the Lua stream", v)
		b, err = os.ReadFile(filepath.Join("..", "testdata", "haproxy-"+v, "show-sess.txt"))
		require.NoError(t, err)
		assert.Zero(t, appletStreams(string(b)), "%s: client and CLI streams", v)
	}
	for version, crashes := range map[string]bool{
		"2.6.12-1+deb12u3": false, "2.7.0": true, "2.9.15": true, "3.0.11-1+deb13u4": true, "3.1.2": true,
		"3.2.26-1": false, "3.3.0": false, "3.4-dev2": false, "3.4.7-1": false,
	} {
		info, err := parseInfo("Name: HAProxy\nVersion: " + version + "\nRelease_date: 2026/10/15\n")
		require.NoError(t, err, version)
		assert.Equal(t, crashes, info.crashesOnLuaStreamDump(), version)
	}
	_, err := parseInfo("Name: HAProxy\n")
	require.ErrorIs(t, err, ErrBadReply)
}

// replayHAProxy stands in for an HAProxy that must not be sent a command:
// it answers from captured replies, in prompt mode (exchange) and in
// one-command mode (dumps), and records the commands. A command it has no
// reply for is answered "Unknown command.".
type replayHAProxy struct {
	path    string
	replies map[string]string
	mu      sync.Mutex
	cmds    []string
}

func startReplay(t *testing.T, replies map[string]string) *replayHAProxy {
	r := &replayHAProxy{path: filepath.Join(t.TempDir(), "replay.sock"), replies: replies}
	l, err := net.Listen("unix", r.path)
	require.NoError(t, err)
	var wg sync.WaitGroup
	t.Cleanup(func() { l.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { r.serve(conn) })
		}
	})
	return r
}

func (r *replayHAProxy) reply(cmd string) string {
	r.mu.Lock()
	r.cmds = append(r.cmds, cmd)
	r.mu.Unlock()
	if out, ok := r.replies[cmd]; ok {
		return out
	}
	return "Unknown command.\n\n"
}

func (r *replayHAProxy) serve(conn net.Conn) {
	defer conn.Close()
	br := bufio.NewReader(conn)
	first, err := br.ReadString('\n')
	if err != nil {
		return
	}
	if first != "prompt\n" {
		_, _ = conn.Write([]byte(r.reply(strings.TrimSuffix(first, "\n"))))
		return
	}
	out := "\n> "
	for {
		line, err := br.ReadString('\n')
		line = strings.TrimSuffix(line, "\n")
		if err != nil || line == "quit" {
			break
		}
		if line == "set severity-output number" {
			out += "\n> "
			continue
		}
		out += strings.TrimSuffix(r.reply(line), "\n") + "\n> "
	}
	_, _ = conn.Write([]byte(out))
}

func (r *replayHAProxy) sent() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.cmds...)
}

func readCapture(t *testing.T, path ...string) string {
	b, err := os.ReadFile(filepath.Join(path...))
	require.NoError(t, err)
	return string(b)
}

// TestDumpGuardHoldsBackCrashingDump: on HAProxy 3.0.11 with a Lua socket
// stream open (its captured replies), neither `show sess all` nor `show
// sess <id>` of that stream is sent; the read fails with
// ErrStreamDumpUnsafe and the socket counts as healthy. Without the Lua
// stream, or on 3.2.26 with it, the dump is sent.
func TestDumpGuardHoldsBackCrashingDump(t *testing.T) {
	info30 := readCapture(t, "..", "testdata", "haproxy-3.0.11", "show-info.txt")
	lua30 := readCapture(t, "testdata", "show-sess-lua-3.0.11.txt")
	r := startReplay(t, map[string]string{"show info": info30, "show sess": lua30})
	c := fakeClient(t, r.path)

	_, err := c.Sessions(testCtx(t))
	require.ErrorIs(t, err, ErrStreamDumpUnsafe)
	assert.Contains(t, err.Error(), "3.0.11")
	_, err = c.Backend("be_app").ReadLocal(testCtx(t), LocalQuery{})
	require.ErrorIs(t, err, ErrStreamDumpUnsafe)
	var luaID string
	for line := range strings.SplitSeq(lua30, "\n") {
		if isAppletLine(line) {
			luaID, _, _ = strings.Cut(line, ":")
		}
	}
	require.NotEmpty(t, luaID)
	err = c.Backend("be_app").ShutdownSession(testCtx(t), luaID)
	require.ErrorIs(t, err, ErrStreamDumpUnsafe)
	assert.Equal(t, []string{"show info", "show sess", "show info", "show sess", "show info", "show sess"}, r.sent(),
		"only show info and the short show sess were sent")
	assert.NoError(t, c.Health().Err, "HAProxy answered")

	// 3.0 without a Lua stream: the short form first, then the dump.
	r = startReplay(t, map[string]string{"show info": info30,
		"show sess":     readCapture(t, "..", "testdata", "haproxy-3.0.11", "show-sess.txt"),
		"show sess all": readCapture(t, "..", "testdata", "haproxy-3.0.11", "show-sess-all.txt")})
	ss, err := fakeClient(t, r.path).Backend("be_app").Sessions(testCtx(t))
	require.NoError(t, err)
	assert.Len(t, ss, 2)
	assert.Equal(t, []string{"show info", "show sess", "show sess all"}, r.sent())

	// 3.2 with the Lua stream: no crash there, the dump alone.
	r = startReplay(t, map[string]string{"show info": readCapture(t, "..", "testdata", "haproxy-3.2.26", "show-info.txt"),
		"show sess all": readCapture(t, "testdata", "show-sess-all-lua-3.2.26.txt")})
	all, err := fakeClient(t, r.path).Sessions(testCtx(t))
	require.NoError(t, err)
	assert.Len(t, all, 2, "the Lua stream and the client's")
	assert.Equal(t, []string{"show info", "show sess all"}, r.sent())
}
