package haproxy

import (
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

var updateCaptures = flag.Bool("update-captures", false, "re-capture the HAProxy replies in ../testdata/ from the haproxy binary")

// capturedDir holds the replies captured from Debian 12's haproxy (2.6.12, the
// only version it ships); see testdata/README.md.
const capturedDir = "../testdata/haproxy-2.6.12"

// captureConfig is what the replies in capturedDir were captured against: four
// servers of different weights, s3 disabled in the configuration, s4 drained
// over the runtime API, and two connections held open through fe_app, both on
// s1 (opened while s2 had weight 0, then set back to 30).
const captureConfig = testenv.HAProxyDefaults + `
frontend fe_app
  bind 127.0.0.1:%d
  default_backend be_app
backend be_app
  balance leastconn
  server s1 %s weight 100
  server s2 %s weight 30
  server s3 %s weight 100 disabled
  server s4 %s weight 100
`

// capturedCommands are the commands whose replies are kept, by file name.
var capturedCommands = []struct{ file, cmd string }{
	{"show-stat.csv", "show stat be_app 6 -1"}, // what Backend.Servers and Client.Stats send
	{"show-servers-state.txt", "show servers state be_app"},
	{"show-sess.txt", "show sess"},
	{"show-sess-all.txt", "show sess all"},
}

// TestCapturedReplies starts the real haproxy in the state the committed replies
// were captured in, captures the replies again and checks that the committed
// files still parse as the fresh ones do: same columns, same servers with the
// same weights, states and counters, same session fields. A new HAProxy that
// changes its output fails here first. With -update-captures it rewrites the files.
func TestCapturedReplies(t *testing.T) {
	fresh := captureReplies(t)
	if *updateCaptures {
		require.NoError(t, os.MkdirAll(capturedDir, 0o755))
		for _, c := range capturedCommands {
			require.NoError(t, os.WriteFile(filepath.Join(capturedDir, c.file), []byte(fresh[c.file]), 0o644))
		}
	}
	committed := make(map[string]string)
	for _, c := range capturedCommands {
		b, err := os.ReadFile(filepath.Join(capturedDir, c.file))
		require.NoError(t, err, "run: go test ./haproxy -run TestCapturedReplies -update-captures")
		committed[c.file] = string(b)
	}

	t.Run("show stat", func(t *testing.T) {
		want, got := parseCapturedStat(t, fresh["show-stat.csv"]), parseCapturedStat(t, committed["show-stat.csv"])
		assert.Equal(t, want, got)
		assert.Equal(t, []ServerStat{
			{Server: "s1", SessionsTotal: 2, CurrentSessions: 2}, {Server: "s2"}, {Server: "s3"}, {Server: "s4"},
		}, got.servers)
	})
	t.Run("show servers state", func(t *testing.T) {
		want, got := parseCapturedState(t, fresh["show-servers-state.txt"]), parseCapturedState(t, committed["show-servers-state.txt"])
		assert.Equal(t, want, got)
		assert.Equal(t, []weighter.ServerState{
			{Name: "s1", Weight: 100, InitialWeight: 100, Admin: weighter.AdminReady, Operational: "up"},
			{Name: "s2", Weight: 30, InitialWeight: 30, Admin: weighter.AdminReady, Operational: "up"},
			{Name: "s3", Weight: 100, InitialWeight: 100, Admin: weighter.AdminMaint, Operational: "down"},
			{Name: "s4", Weight: 100, InitialWeight: 100, Admin: weighter.AdminDrain, Operational: "up"},
		}, got.servers)
	})
	t.Run("show sess", func(t *testing.T) {
		want, got := sessionShapes(fresh["show-sess.txt"], false), sessionShapes(committed["show-sess.txt"], false)
		assert.Equal(t, want, got)
		assert.Len(t, got, 3, "the two held connections and the CLI's own session")
	})
	t.Run("show sess all", func(t *testing.T) {
		want, got := sessionShapes(fresh["show-sess-all.txt"], true), sessionShapes(committed["show-sess-all.txt"], true)
		assert.Equal(t, want, got)
		assert.Len(t, got, 3, "the two held connections and the CLI's own session")
	})
}

// captureReplies brings a fresh haproxy into the captured state and returns
// each command's reply by file name.
func captureReplies(t *testing.T) map[string]string {
	front := testenv.FreePort(t)
	h := testenv.StartHAProxy(t, fmt.Sprintf(captureConfig, front, testenv.StartDiscardServer(t),
		testenv.StartDiscardServer(t), testenv.StartDiscardServer(t), testenv.StartDiscardServer(t)))
	require.Equal(t, "\n", testenv.Command(t, h.Socket, "set server be_app/s4 state drain"))
	require.Equal(t, "\n", testenv.Command(t, h.Socket, "set server be_app/s2 weight 0"))
	for range 2 {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", front), 5*time.Second)
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		st := parseCapturedStat(t, testenv.Command(t, h.Socket, "show stat be_app 6 -1"))
		assert.Equal(c, uint64(2), st.servers[0].CurrentSessions)
	}, 10*time.Second, 20*time.Millisecond, "two connections open on s1")
	require.Equal(t, "\n", testenv.Command(t, h.Socket, "set server be_app/s2 weight 30"))
	out := make(map[string]string)
	for _, c := range capturedCommands {
		out[c.file] = testenv.Command(t, h.Socket, c.cmd)
	}
	return out
}

// capturedStat is what the parsers make of a `show stat` reply, with the values
// that depend on the moment (times, addresses) left out.
type capturedStat struct {
	columns []string          // in HAProxy's order
	rows    map[string]string // svname → the columns below that do not vary
	servers []ServerStat
}

func parseCapturedStat(t require.TestingT, reply string) capturedStat {
	tab, err := parseStat(reply)
	require.NoError(t, err)
	st := capturedStat{columns: make([]string, len(tab.cols)), rows: make(map[string]string)}
	for name, i := range tab.cols {
		st.columns[i] = name
	}
	for _, r := range tab.rows {
		var b strings.Builder
		for _, col := range []string{"pxname", "status", "weight", "uweight", "act", "bck", "scur", "stot", "type", "sid", "mode", "algo"} {
			fmt.Fprintf(&b, "%s=%s ", col, tab.get(r, col))
		}
		st.rows[tab.get(r, "svname")] = b.String()
	}
	st.servers, err = serverStats("be_app", tab)
	require.NoError(t, err)
	return st
}

// capturedState is what parseServersState makes of a reply, addresses left out
// (the discard servers' ports change), with the column header.
type capturedState struct {
	header  string
	servers []weighter.ServerState
}

func parseCapturedState(t require.TestingT, reply string) capturedState {
	servers, err := parseServersState("be_app", reply)
	require.NoError(t, err)
	for i := range servers {
		servers[i].Address = ""
	}
	lines := strings.Split(reply, "\n")
	require.Greater(t, len(lines), 2)
	return capturedState{header: lines[1], servers: servers}
}

var (
	sessionStart = regexp.MustCompile(`^0x[0-9a-f]+: `)
	sessionKey   = regexp.MustCompile(`([a-z_0-9.]+)=`)
	sessionValue = regexp.MustCompile(`\b(fe|be|srv|proto|frontend|backend|server)=([^ ,()]+)`)
)

// sessionShapes reduces a `show sess` (one line per session) or `show sess all`
// (a block per session) reply to one string per session: the names of its fields
// in order, with the values that name the proxy, server and protocol, so that
// a field HAProxy adds, drops or renames shows while counters and times do not.
// Sessions are sorted, their order in the reply being the order of their tasks.
func sessionShapes(reply string, all bool) []string {
	var shapes []string
	var cur strings.Builder
	flush := func() {
		if cur.Len() > 0 {
			shapes = append(shapes, cur.String())
			cur.Reset()
		}
	}
	for _, line := range strings.Split(reply, "\n") {
		if sessionStart.MatchString(line) {
			flush()
		} else if !all || !strings.HasPrefix(line, " ") {
			continue
		}
		for _, m := range sessionKey.FindAllStringSubmatch(line, -1) {
			cur.WriteString(m[1] + " ")
		}
		for _, m := range sessionValue.FindAllStringSubmatch(line, -1) {
			cur.WriteString(m[0] + " ")
		}
		cur.WriteString("| ")
	}
	flush()
	slices.Sort(shapes)
	return shapes
}
