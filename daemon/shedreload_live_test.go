package daemon

import (
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/config"
	"github.com/haproxy-weighter/haproxy-weighter/haproxy"
	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// lines returns every command line sent so far, as sent (the master CLI's
// @1 prefix taken off, an @!<pid> one kept).
func (c *commandCounter) lines() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.sent...)
}

// TestKernelShedStreamOfOldWorker: through the master CLI (haproxy -W -S),
// a stream the socket table reader found in a worker stays that worker's
// after a reload (USR2 to the master): the session the shed planner is
// offered names the old worker, closing it closes it there (the client
// sees its connection end), and the new worker is never asked for it. On
// every HAProxy version a Debian user has.
func TestKernelShedStreamOfOldWorker(t *testing.T) {
	for _, version := range testenv.HAProxyVersions() {
		t.Run(version, func(t *testing.T) { testShedStreamOfOldWorker(t, version) })
	}
}

func testShedStreamOfOldWorker(t *testing.T, version string) {
	front := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	h := testenv.StartHAProxyMasterVersion(t, version, testenv.HAProxyDefaults+fmt.Sprintf(
		"frontend fe\n  bind %s\n  default_backend be\nbackend be\n  balance leastconn\n  server s1 %s\n  server s2 %s\n",
		front, testenv.StartDiscardServer(t), testenv.StartDiscardServer(t)))
	counted := startCommandCounter(t, h.Socket)
	hc, err := haproxy.New(haproxy.Config{Socket: counted.Socket, Master: true})
	require.NoError(t, err)
	hb := hc.Backend("be")
	var logs testenv.SyncBuffer
	k := newKernelReader(hb, hc, true, weighter.BytesIn, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	sh, err := weighter.NewShedder(weighter.ShedPolicy{Above: 1.5, For: 1, MaxPerMinute: 2, MaxShare: 1, Progress: 0.2})
	require.NoError(t, err)
	k.shedder.Store(sh) // for: 1: every server's connections are looked up

	whale := dialShedClient(t, front, shedWhale)
	client := whale.conn.LocalAddr().String()
	ctx := testenv.Context(t, time.Minute)
	// open reads the table and returns the session the planner is offered
	// for the whale's connection.
	open := func() weighter.ShedSession {
		t.Helper()
		servers, err := hb.Servers(ctx)
		require.NoError(t, err)
		got, err := k.ReadLocal(ctx, servers)
		require.NoError(t, err)
		for _, s := range got.Open {
			if s.Client == client {
				return s
			}
		}
		t.Fatalf("no open session of client %s in %+v\n%s", client, got.Open, logs.String())
		return weighter.ShedSession{}
	}
	var before weighter.ShedSession
	testenv.WaitFor(t, "the whale's stream found", func() bool {
		before = open()
		return before.Serial != 0
	})
	first := h.Worker()
	assert.True(t, strings.HasSuffix(before.ID, "@!"+strconv.Itoa(first)), "session %s: not named by its worker %d", before.ID, first)

	second := h.Reload()
	require.NotEqual(t, first, second)
	after := open()
	t.Logf("before the reload %s #%d; after it %s #%d (workers %d, then %d)", before.ID, before.Serial, after.ID, after.Serial, first, second)
	assert.Equal(t, before.ID, after.ID, "the stream is the old worker's, named by it")
	assert.Equal(t, before.Serial, after.Serial)

	require.NoError(t, hb.CloseSession(ctx, after), "close the old worker's stream")
	select {
	case <-whale.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the whale's connection is still open after its stream was closed")
	}
	id, _, _ := strings.Cut(after.ID, "@!")
	for _, line := range counted.lines() {
		if strings.Contains(line, id) && !strings.HasPrefix(line, "@!"+strconv.Itoa(first)+" ") {
			t.Errorf("%q: the stream %s of worker %d was asked of another process", line, id, first)
		}
	}

	// Closing it again: it ended, with its worker (which had nothing else
	// to serve).
	err = hb.CloseSession(ctx, after)
	assert.ErrorIs(t, err, weighter.ErrSessionGone)
}

// TestShedReachesTheOldWorker: the daemon on the master CLI, started after
// a reload left the whale and every other client on the old worker, sheds
// the whale: its stream is found in the old worker (the socket table counts
// that worker's connections, the new worker has no such stream) and closed
// there; no other client is touched, the new worker is never asked for the
// stream, and nothing is said of a session that had already ended.
func TestShedReachesTheOldWorker(t *testing.T) {
	front := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	var hcfg strings.Builder
	hcfg.WriteString(testenv.HAProxyDefaults)
	fmt.Fprintf(&hcfg, "frontend fe\n  bind %s\n  default_backend be\nbackend be\n  balance leastconn\n", front)
	servers := []string{"s1", "s2", "s3", "s4"}
	for _, s := range servers {
		fmt.Fprintf(&hcfg, "  server %s %s weight 100\n", s, testenv.StartDiscardServer(t))
	}
	h := testenv.StartHAProxyMaster(t, hcfg.String())
	hc, err := haproxy.New(haproxy.Config{Socket: h.Socket, Master: true})
	require.NoError(t, err)
	hb := hc.Backend("be")
	// As TestShedMovesTheWhale: the whale and 19 ordinary clients on one
	// server, 20 on two others, none on the last.
	whale := dialShedClient(t, front, shedWhale)
	var ordinary []*shedClient
	for range 4*shedPerServer - 1 {
		ordinary = append(ordinary, dialShedClient(t, front, shedOrdinary))
		time.Sleep(5 * time.Millisecond)
	}
	placed := waitStreams(t, hb, append([]*shedClient{whale}, ordinary...))
	hot := placed[whale.conn.LocalAddr().String()].Server
	empty := servers[len(servers)-1]
	if empty == hot {
		empty = servers[0]
	}
	var staying []*shedClient
	for _, c := range ordinary {
		if placed[c.conn.LocalAddr().String()].Server == empty {
			c.conn.Close()
			<-c.done
		} else {
			staying = append(staying, c)
		}
	}
	require.Len(t, staying, 3*shedPerServer-1)
	old := h.Worker()
	h.Reload() // every client stays on the old worker

	counted := startCommandCounter(t, h.Socket)
	var logs testenv.SyncBuffer
	yml := fmt.Sprintf("listen: \"\"\ninterval: 1s\njitter: 0\nhaproxy: {socket: %s, master: true}\nbackends:\n  - name: be\n"+
		"    source: {haproxy: {counter: bytes_in}}\n"+
		"    shed: {above: 2.2, for: 2, max_per_minute: 2, max_share: 0.02, min_age: 1s, cooldown: 2m, progress: 0.2}\n", counted.Socket)
	cfg, err := config.Parse("shed.yml", []byte(yml), nil)
	require.NoError(t, err)
	d := New(cfg, Options{Registry: prometheus.NewRegistry(),
		Log: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	runDaemon(t, d)
	select {
	case <-whale.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("the whale was not shed within 30 s; shedding said:\n%s", recordsText(shedRecords(t, &logs)))
	}
	var shed shedRecord
	testenv.WaitFor(t, "the shed in the log", func() bool {
		for _, r := range shedRecords(t, &logs) {
			if r.Msg == "session shed" {
				shed = r
				return true
			}
		}
		return false
	})
	t.Logf("shed %s (client %s) from %s: %s", shed.Session, shed.Client, shed.Server, shed.Reason)
	assert.Equal(t, whale.conn.LocalAddr().String(), shed.Client)
	assert.Equal(t, hot, shed.Server)
	assert.True(t, strings.HasSuffix(shed.Session, "@!"+strconv.Itoa(old)), "the stream is named by the old worker %d", old)
	for i, c := range staying {
		assert.False(t, c.closed.Load(), "ordinary client %d was closed", i)
	}
	for _, r := range shedRecords(t, &logs) {
		assert.NotEqual(t, "session to shed already ended", r.Msg, "session %s", r.Session)
	}
	id, _, _ := strings.Cut(shed.Session, "@!")
	for _, line := range counted.lines() {
		if strings.Contains(line, id) {
			assert.True(t, strings.HasPrefix(line, fmt.Sprintf("@!%d ", old)), "%q: the old worker's stream asked of another process", line)
		}
	}
}
