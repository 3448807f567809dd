package fastsignal

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/haproxy"
	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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
	counted := testenv.StartCommandCounter(t, h.Socket)
	hc, err := haproxy.New(haproxy.Config{Socket: counted.Socket, Master: true})
	require.NoError(t, err)
	hb := hc.Backend("be")
	var logs testenv.SyncBuffer
	k := newKernelReader(hb, hc, true, weighter.BytesIn, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	sh, err := weighter.NewShedder(weighter.ShedPolicy{Above: 1.5, For: 1, MaxPerMinute: 2, MaxShare: 1, Progress: 0.2})
	require.NoError(t, err)
	k.shedder.Store(sh) // for: 1: every server's connections are looked up

	whale := testenv.DialShedClient(t, front, shedWhale)
	client := whale.Conn.LocalAddr().String()
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
	case <-whale.Done:
	case <-time.After(10 * time.Second):
		t.Fatal("the whale's connection is still open after its stream was closed")
	}
	id, _, _ := strings.Cut(after.ID, "@!")
	for _, line := range counted.Lines() {
		if strings.Contains(line, id) && !strings.HasPrefix(line, "@!"+strconv.Itoa(first)+" ") {
			t.Errorf("%q: the stream %s of worker %d was asked of another process", line, id, first)
		}
	}

	// Closing it again: it ended, with its worker (which had nothing else
	// to serve).
	err = hb.CloseSession(ctx, after)
	// Gone; or, when the close reaches the worker while it exits, the
	// master passes it to a CLI that closes before its first byte (a
	// failed close the next cycle does not repeat). Never closed twice.
	if !errors.Is(err, weighter.ErrSessionGone) {
		assert.ErrorIs(t, err, haproxy.ErrBadReply, "closing it again: neither gone nor its exiting worker's empty reply")
	}
}
