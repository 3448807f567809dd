package haproxy

import (
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
)

var captureHAProxy = flag.String("capture-haproxy", "",
	"a command that runs HAProxy (\"haproxy\", or a newer one through the trixie loader): "+
		"capture its replies into ../testdata/haproxy-<version>/ and testdata/ (TestCapturedVersions)")

// capturedVersions are the HAProxy versions whose replies are committed:
// Debian 12's 2.6, 13's 3.0, sid's 3.2 and experimental's 3.4.
var capturedVersions = []string{"2.6.12", "3.0.11", "3.2.26", "3.4.7"}

// crashesOnLuaDump: the captured versions on which `show sess all` (and
// `show sess <id>` of the Lua stream) crashes HAProxy while a Lua socket
// stream exists, so that no such dump of it can be captured.
var crashesOnLuaDump = map[string]bool{"3.0.11": true}

// TestCapturedVersions reads the committed replies of every captured HAProxy
// version with the package's parsers: the same servers, weights and states
// in `show stat` and `show servers state`, the same streams with the same
// byte counts in `show sess all` (whichever line carries them), a Lua
// socket's stream read as internal, and `show info`'s version. With
// -capture-haproxy it captures the given binary's replies first.
func TestCapturedVersions(t *testing.T) {
	if *captureHAProxy != "" {
		captureVersion(t, *captureHAProxy)
	}
	for _, v := range capturedVersions {
		t.Run(v, func(t *testing.T) {
			dir := filepath.Join("..", "testdata", "haproxy-"+v)
			read := func(path string) string {
				b, err := os.ReadFile(path)
				require.NoError(t, err, "capture with: go test ./haproxy -run TestCapturedVersions -capture-haproxy=<command>")
				return string(b)
			}
			st := parseCapturedStat(t, read(filepath.Join(dir, "show-stat.csv")))
			assert.Equal(t, []ServerStat{
				{Server: "s1", SessionsTotal: 2, CurrentSessions: 2}, {Server: "s2"}, {Server: "s3"}, {Server: "s4"},
			}, st.servers)
			state := parseCapturedState(t, read(filepath.Join(dir, "show-servers-state.txt")))
			assert.Equal(t, parseCapturedState(t, read(filepath.Join("..", "testdata", "haproxy-2.6.12", "show-servers-state.txt"))).servers,
				state.servers)

			held, err := parseDump(read(filepath.Join(dir, "show-sess-all.txt")))
			require.NoError(t, err)
			assert.Zero(t, held.skipped)
			assert.Equal(t, []streamShape{{"fe_app", "be_app", "s1", 0, 0}, {"fe_app", "be_app", "s1", 0, 0}},
				shapesOf(notCLIStreams(held.sessions)), "the two held connections")
			require.Len(t, held.sessions, 3, "and the CLI's own stream")
			for _, s := range held.sessions {
				if s.Frontend == cliFrontend {
					assert.Equal(t, int64(len("show sess all\n")), s.ReqBytes, "the CLI's request is its command")
				}
			}

			info, err := parseInfo(read(filepath.Join(dir, "show-info.txt")))
			require.NoError(t, err)
			assert.Equal(t, v, info.release())

			moved, err := parseDump(read(filepath.Join("testdata", "show-sess-all-"+v+".txt")))
			require.NoError(t, err)
			assert.Equal(t, wantCapturedShapes, shapesOf(notCLIStreams(moved.sessions)),
				"request bytes are what the client sent, response bytes what the server sent")

			short := read(filepath.Join("testdata", "show-sess-lua-"+v+".txt"))
			assert.Equal(t, 1, appletStreams(short), "the short form lists the Lua stream without a frontend")
			if crashesOnLuaDump[v] {
				return
			}
			lua, err := parseDump(read(filepath.Join("testdata", "show-sess-all-lua-"+v+".txt")))
			require.NoError(t, err)
			assert.Zero(t, lua.skipped)
			var internal []Session
			for _, s := range lua.sessions {
				if s.Internal {
					internal = append(internal, s)
				}
			}
			require.Len(t, internal, 1)
			assert.Equal(t, streamShape{"LUA-SOCKET", "LUA-SOCKET", "", internal[0].ReqBytes, 0}, shapesOf(internal)[0])
			assert.Positive(t, internal[0].ReqBytes, "the Lua task sends")
		})
	}
}

func notCLIStreams(ss []Session) []Session {
	var out []Session
	for _, s := range ss {
		if s.Frontend != cliFrontend {
			out = append(out, s)
		}
	}
	return out
}

// captureVersion runs the HAProxy of command in the states the committed
// replies were captured in and writes them. Each state gets a process of
// its own.
func captureVersion(t *testing.T, command string) {
	write := func(path, reply string) {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(reply), 0o644))
	}
	var v string
	{ // captureConfig's state, as TestCapturedReplies makes it.
		front := testenv.FreePort(t)
		socket := runHAProxy(t, command, "", fmt.Sprintf(captureConfig, front, testenv.StartDiscardServer(t),
			testenv.StartDiscardServer(t), testenv.StartDiscardServer(t), testenv.StartDiscardServer(t)))
		info, err := parseInfo(testenv.Command(t, socket, "show info"))
		require.NoError(t, err)
		v = info.release()
		require.Equal(t, "\n", testenv.Command(t, socket, "set server be_app/s4 state drain"))
		require.Equal(t, "\n", testenv.Command(t, socket, "set server be_app/s2 weight 0"))
		for range 2 {
			c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", front), 5*time.Second)
			require.NoError(t, err)
			t.Cleanup(func() { c.Close() })
		}
		testenv.WaitFor(t, "two connections open on s1", func() bool {
			return parseCapturedStat(t, testenv.Command(t, socket, "show stat be_app 6 -1")).servers[0].CurrentSessions == 2
		})
		require.Equal(t, "\n", testenv.Command(t, socket, "set server be_app/s2 weight 30"))
		dir := filepath.Join("..", "testdata", "haproxy-"+v)
		for _, c := range capturedCommands {
			write(filepath.Join(dir, c.file), testenv.Command(t, socket, c.cmd))
		}
		write(filepath.Join(dir, "show-info.txt"), testenv.Command(t, socket, "show info"))
	}
	{ // startCaptureScenario's streams, with their bytes.
		feApp, feOther := testenv.FreePort(t), testenv.FreePort(t)
		socket := runHAProxy(t, command, "", testenv.HAProxyDefaults+fmt.Sprintf(`
frontend fe_app
  bind 127.0.0.1:%d
  default_backend be_app
frontend fe_other
  bind 127.0.0.1:%d
  default_backend be_other
backend be_app
  balance roundrobin
  server s1 %s
  server s2 %s
backend be_other
  server t1 %s
`, feApp, feOther, testenv.StartDiscardServer(t), startEchoServer(t), testenv.StartDiscardServer(t)))
		c1, c2, c3 := dialFront(t, feApp), dialFront(t, feApp), dialFront(t, feOther)
		_, err := c1.Write(make([]byte, 1000))
		require.NoError(t, err)
		_, err = c2.Write(make([]byte, 700))
		require.NoError(t, err)
		_, err = c3.Write(nil)
		require.NoError(t, err)
		var dump string
		require.EventuallyWithT(t, func(ct *assert.CollectT) {
			dump = testenv.Command(t, socket, "show sess all")
			d, err := parseDump(dump)
			require.NoError(ct, err)
			assert.Equal(ct, wantCapturedShapes, shapesOf(notCLIStreams(d.sessions)))
		}, 10*time.Second, 20*time.Millisecond, "the streams' byte counts")
		write(filepath.Join("testdata", "show-sess-all-"+v+".txt"), dump)
	}
	{ // A Lua task's socket stream.
		lua := filepath.Join(t.TempDir(), "socket.lua")
		host, port, _ := strings.Cut(testenv.StartDiscardServer(t), ":")
		require.NoError(t, os.WriteFile(lua, []byte(fmt.Sprintf(luaSocketTask, host, atoi(t, port))), 0o644))
		front := testenv.FreePort(t)
		socket := runHAProxy(t, command, "  lua-load "+lua+"\n", testenv.HAProxyDefaults+fmt.Sprintf(`
frontend fe_app
  bind 127.0.0.1:%d
  default_backend be_app
backend be_app
  server s1 %s
`, front, testenv.StartDiscardServer(t)))
		c := dialFront(t, front)
		_, err := c.Write(make([]byte, 100))
		require.NoError(t, err)
		var short string
		testenv.WaitFor(t, "the Lua stream and the client's", func() bool {
			short = testenv.Command(t, socket, "show sess")
			return appletStreams(short) == 1 && strings.Contains(short, "srv=s1")
		})
		write(filepath.Join("testdata", "show-sess-lua-"+v+".txt"), short)
		if !crashesOnLuaDump[v] {
			write(filepath.Join("testdata", "show-sess-all-lua-"+v+".txt"), testenv.Command(t, socket, "show sess all"))
		}
	}
}

func atoi(t *testing.T, s string) int {
	var n int
	_, err := fmt.Sscan(s, &n)
	require.NoError(t, err)
	return n
}

// runHAProxy starts command (split on spaces) with a global section holding
// an admin socket and global (more global lines), then cfg, and returns the
// socket once it answers.
func runHAProxy(t *testing.T, command, global, cfg string) string {
	dir := t.TempDir()
	socket := filepath.Join(dir, "admin.sock")
	path := filepath.Join(dir, "haproxy.cfg")
	require.NoError(t, os.WriteFile(path, []byte("global\n  stats socket "+socket+" mode 600 level admin\n"+global+cfg), 0o644))
	args := append(strings.Fields(command), "-f", path, "-db")
	cmd := exec.Command(args[0], args[1:]...)
	var log testenv.SyncBuffer
	cmd.Stdout, cmd.Stderr = &log, &log
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	testenv.WaitFor(t, "haproxy's socket", func() bool {
		c, err := net.Dial("unix", socket)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return socket
}
