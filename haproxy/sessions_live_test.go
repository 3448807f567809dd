package haproxy

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/duration"
	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

var captureStreams = flag.Bool("capture-streams", false,
	"rewrite "+streamDumpFile+" from the haproxy binary (TestSessionsCapturedDump)")

// streamDumpFile is a `show sess all` reply of HAProxy 2.6.12 (Debian 12),
// captured by TestSessionsCapturedDump -capture-streams; testdata/README.md
// says how.
const streamDumpFile = "testdata/show-sess-all-2.6.12.txt"

// streamShape is what of a Session does not change from one capture to the
// next (addresses, ids and times do).
type streamShape struct {
	Frontend, Backend, Server string
	ReqBytes, ResBytes        int64
}

func shapesOf(ss []Session) []streamShape {
	out := make([]streamShape, 0, len(ss))
	for _, s := range ss {
		out = append(out, streamShape{s.Frontend, s.Backend, s.Server, s.ReqBytes, s.ResBytes})
	}
	slices.SortFunc(out, func(a, b streamShape) int {
		return strings.Compare(fmt.Sprint(a), fmt.Sprint(b))
	})
	return out
}

// wantCapturedShapes are the streams of the captured dump: on be_app, s1
// holds a connection that sent 1,000 bytes to a discard server and s2 one
// that sent 700 bytes to an echo server (echoed back); on be_other, t1 holds
// an idle connection.
var wantCapturedShapes = []streamShape{
	{"fe_app", "be_app", "s1", 1000, 0},
	{"fe_app", "be_app", "s2", 700, 700},
	{"fe_other", "be_other", "t1", 0, 0},
}

// TestSessionsCapturedDump brings a real HAProxy into the state the committed
// dump was captured in, reads it through Client.Sessions and Backend.Sessions,
// and checks that the committed file parses to the same streams. With
// -capture-streams it rewrites the file first.
func TestSessionsCapturedDump(t *testing.T) {
	h, c := startCaptureScenario(t)
	all, err := c.Sessions(testCtx(t))
	require.NoError(t, err)
	assert.Equal(t, wantCapturedShapes, shapesOf(all))
	app, err := c.Backend("be_app").Sessions(testCtx(t))
	require.NoError(t, err)
	assert.Equal(t, wantCapturedShapes[:2], shapesOf(app))
	for _, s := range all {
		assert.True(t, isSessionID(s.ID), s.ID)
		assert.NotZero(t, s.Serial)
		addr, ok := s.ClientAddr()
		assert.True(t, ok && addr.Addr().IsLoopback(), s.Client)
		assert.Less(t, s.Age, time.Minute)
	}

	reply := rawDump(t, h.Socket, "show sess all")
	if *captureStreams {
		require.NoError(t, os.MkdirAll(filepath.Dir(streamDumpFile), 0o755))
		require.NoError(t, os.WriteFile(streamDumpFile, []byte(reply), 0o644))
	}
	fresh, err := parseSessionDump(strings.NewReader(reply), maxSessionDump, nil)
	require.NoError(t, err)
	b, err := os.ReadFile(streamDumpFile)
	require.NoError(t, err, "run: go test ./haproxy -run TestSessionsCapturedDump -capture-streams")
	committed, err := parseSessionDump(strings.NewReader(string(b)), maxSessionDump, nil)
	require.NoError(t, err)
	// The CLI's own stream is in both.
	notCLI := func(ss []Session) []Session {
		return slices.DeleteFunc(slices.Clone(ss), func(s Session) bool { return s.Frontend == cliFrontend })
	}
	assert.Equal(t, wantCapturedShapes, shapesOf(notCLI(fresh.sessions)))
	assert.Equal(t, wantCapturedShapes, shapesOf(notCLI(committed.sessions)))
	assert.Equal(t, len(fresh.sessions), len(committed.sessions))
}

// startCaptureScenario starts HAProxy with the streams of wantCapturedShapes
// open, and waits until the dump shows their byte totals.
func startCaptureScenario(t *testing.T) (*testenv.HAProxy, *Client) {
	feApp, feOther := testenv.FreePort(t), testenv.FreePort(t)
	h := testenv.StartHAProxy(t, testenv.HAProxyDefaults+fmt.Sprintf(`
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
	c := newClient(t, h.Socket)
	// roundrobin: the first connection goes to s1, the second to s2.
	c1 := dialFront(t, feApp)
	waitServer(t, c.Backend("be_app"), c1, "s1")
	c2 := dialFront(t, feApp)
	waitServer(t, c.Backend("be_app"), c2, "s2")
	c3 := dialFront(t, feOther)
	waitServer(t, c.Backend("be_other"), c3, "t1")
	_, err := c1.Write(make([]byte, 1000))
	require.NoError(t, err)
	_, err = c2.Write(make([]byte, 700))
	require.NoError(t, err)
	_, err = io.ReadFull(c2, make([]byte, 700))
	require.NoError(t, err)
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		all, err := c.Sessions(testCtx(t))
		require.NoError(ct, err)
		assert.Equal(ct, wantCapturedShapes, shapesOf(all))
	}, 10*time.Second, 20*time.Millisecond)
	return h, c
}

// rawDump sends one command in one-command mode and returns the whole reply.
func rawDump(t testing.TB, socket, cmd string) string {
	t.Helper()
	conn, err := net.DialTimeout("unix", socket, 5*time.Second)
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(10*time.Second)))
	_, err = io.WriteString(conn, cmd+"\n")
	require.NoError(t, err)
	b, err := io.ReadAll(conn)
	require.NoError(t, err)
	return string(b)
}

// startEchoServer is a loopback server that sends back what it reads.
func startEchoServer(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); c.Close() }()
		}
	}()
	return ln.Addr().String()
}

func dialFront(t testing.TB, port int) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 5*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// sessionOf waits until b lists the stream of client connection c (matched
// by its source address) with a server chosen, and returns it.
func sessionOf(t testing.TB, b *RuntimeBackend, c net.Conn) Session {
	t.Helper()
	local := c.LocalAddr().String()
	var found Session
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		ss, err := b.Sessions(testCtx(t))
		require.NoError(ct, err)
		for _, s := range ss {
			if s.Client == local && s.Server != "" {
				found = s
				return
			}
		}
		ct.Errorf("no stream from %s on %s", local, b.Name())
	}, 10*time.Second, 10*time.Millisecond)
	return found
}

func waitServer(t testing.TB, b *RuntimeBackend, c net.Conn, server string) Session {
	t.Helper()
	s := sessionOf(t, b, c)
	require.Equal(t, server, s.Server, "stream from %s", s.Client)
	return s
}

// TestSessionsTotalsAdvanceLive sends a steady flow over one open connection
// and reads the stream's req total twice, a second apart: it grows, with and
// without `option contstats`, while (without contstats) the server's `show
// stat` bin does not move until the connection closes.
func TestSessionsTotalsAdvanceLive(t *testing.T) {
	for _, contstats := range []bool{false, true} {
		t.Run(fmt.Sprintf("contstats=%v", contstats), func(t *testing.T) {
			t.Parallel()
			opt := ""
			if contstats {
				opt = "  option contstats\n"
			}
			front := testenv.FreePort(t)
			h := testenv.StartHAProxy(t, testenv.HAProxyDefaults+fmt.Sprintf(`
frontend fe
  bind 127.0.0.1:%d
%s  default_backend be
backend be
  server s1 %s
`, front, opt, testenv.StartDiscardServer(t)))
			be := newClient(t, h.Socket).Backend("be")
			conn := dialFront(t, front)
			sessionOf(t, be, conn)

			// ~160 kB/s: 4 kB every 25 ms, until the test ends.
			testenv.WriteEvery(t, conn, 4<<10, 25*time.Millisecond)

			first := sessionOf(t, be, conn)
			time.Sleep(time.Second) // the interval being measured, not a wait for an outcome
			second := sessionOf(t, be, conn)
			require.Equal(t, first.ID, second.ID)
			require.Equal(t, first.Serial, second.Serial)
			grew := second.ReqBytes - first.ReqBytes
			t.Logf("req total %d → %d bytes in ~1 s", first.ReqBytes, second.ReqBytes)
			// 1 s at ~160 kB/s; a loaded machine may skip ticks, not a third of them.
			assert.Greater(t, grew, int64(50_000))
			assert.Equal(t, int64(0), second.ResBytes, "the discard server sends nothing")
			if !contstats {
				stats, err := newClient(t, h.Socket).Stats(testCtx(t), "be")
				require.NoError(t, err)
				require.Len(t, stats, 1)
				assert.Zero(t, stats[0].BytesIn, "without contstats show stat counts bytes when the connection closes")
			}
		})
	}
}

// TestShutdownSession closes one of two streams by id: that client sees the
// connection end, the other stays open and listed. A gone, malformed or other
// backend's id closes nothing and says why.
func TestShutdownSession(t *testing.T) {
	front, front2 := testenv.FreePort(t), testenv.FreePort(t)
	h := testenv.StartHAProxy(t, testenv.HAProxyDefaults+fmt.Sprintf(`
frontend fe
  bind 127.0.0.1:%d
  default_backend be
frontend fe2
  bind 127.0.0.1:%d
  default_backend be2
backend be
  balance roundrobin
  server s1 %s
  server s2 %s
backend be2
  server t1 %s
`, front, front2, testenv.StartDiscardServer(t), testenv.StartDiscardServer(t), testenv.StartDiscardServer(t)))
	c := newClient(t, h.Socket)
	var cmds []string
	var mu sync.Mutex
	c.trace = func(batch []string) { mu.Lock(); cmds = append(cmds, batch...); mu.Unlock() }
	be, be2 := c.Backend("be"), c.Backend("be2")
	a, b, other := dialFront(t, front), dialFront(t, front), dialFront(t, front2)
	sa, sb, so := sessionOf(t, be, a), sessionOf(t, be, b), sessionOf(t, be2, other)

	t.Run("malformed ids are refused unsent", func(t *testing.T) {
		mu.Lock()
		before := len(cmds)
		mu.Unlock()
		for _, id := range []string{"", "0x", "0X1f", "1f", "0x1g", "0xAB", "0x1 ", " 0x1", "0x1;show stat",
			"0x1\nshutdown sessions server be/s1", "0x" + strings.Repeat("f", 17), "all"} {
			err := be.ShutdownSession(testCtx(t), id)
			assert.ErrorIs(t, err, ErrInvalidSessionID, "%q", id)
		}
		mu.Lock()
		assert.Equal(t, before, len(cmds), "nothing sent: %q", cmds[before:])
		mu.Unlock()
	})

	t.Run("another backend's stream is refused", func(t *testing.T) {
		err := be.ShutdownSession(testCtx(t), so.ID)
		require.ErrorIs(t, err, ErrNoSession)
		assert.Contains(t, err.Error(), `backend "be2"`)
		assertOpen(t, other)
	})

	t.Run("a stale serial is refused", func(t *testing.T) {
		stale := sb
		stale.Serial++
		require.ErrorIs(t, be.ShutdownStream(testCtx(t), stale), ErrNoSession)
		assertOpen(t, b)
	})

	require.NoError(t, be.ShutdownSession(testCtx(t), sa.ID))
	// The client sees the end of the connection: EOF or a reset.
	require.NoError(t, a.SetReadDeadline(time.Now().Add(5*time.Second)))
	_, err := a.Read(make([]byte, 1))
	require.Error(t, err)
	var ne net.Error
	require.False(t, errors.As(err, &ne) && ne.Timeout(), "read timed out: the connection is still open")
	t.Logf("client of the closed stream reads: %v", err)

	assertOpen(t, b)
	left, err := be.Sessions(testCtx(t))
	require.NoError(t, err)
	require.Len(t, left, 1)
	assert.Equal(t, sb.ID, left[0].ID)

	t.Run("a gone stream is refused", func(t *testing.T) {
		// HAProxy hands a freed stream's memory to the next stream at once,
		// often the CLI connection that asks next: then the id names that
		// CLI stream (backend "") and the backend check refuses it.
		err := be.ShutdownSession(testCtx(t), sa.ID)
		require.ErrorIs(t, err, ErrNoSession)
		assertOpen(t, b)
	})

	t.Run("HAProxy's text for an id it does not know", func(t *testing.T) {
		// 0x10 is no stream's address: no allocation sits that low.
		err := be.ShutdownSession(testCtx(t), "0x10")
		require.ErrorIs(t, err, ErrNoSession)
		assert.Contains(t, err.Error(), "Session not found")
		// shutdown session itself says so in its own words.
		err = sessionError(0, replyError(raw(t, c, "shutdown session 0x10")))
		require.ErrorIs(t, err, ErrNoSession)
		assert.Contains(t, err.Error(), "No such session")
	})

	require.NoError(t, be.ShutdownStream(testCtx(t), sb))
	require.NoError(t, b.SetReadDeadline(time.Now().Add(5*time.Second)))
	_, err = b.Read(make([]byte, 1))
	require.Error(t, err)
	require.False(t, errors.As(err, &ne) && ne.Timeout(), "read timed out: the connection is still open")
	assertOpen(t, other)
}

// assertOpen checks that nothing arrives on c, not even EOF, for a moment.
func assertOpen(t *testing.T, c net.Conn) {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(200*time.Millisecond)))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	assert.True(t, errors.As(err, &ne) && ne.Timeout(), "connection should still be open, read: %v", err)
}

// TestShutdownThenReconnectFollowsWeights sheds a stream on a leastconn
// backend and reconnects: the new connection goes where the weights send it,
// also when that is not the server with the fewest connections.
func TestShutdownThenReconnectFollowsWeights(t *testing.T) {
	for _, tc := range []struct {
		name      string
		shedFrom  string
		wantAfter string
	}{
		// s1 weight 1, s2 weight 100, two streams each. Shedding from s2
		// leaves s2 the emptier and the heavier: the client comes back to s2.
		{"shed from the heavy server", "s2", "s2"},
		// Shedding from s1 leaves s1 with fewer connections (1 against 2),
		// yet 2/1 > 3/100: the weights send the client to s2.
		{"shed from the light server", "s1", "s2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			front := testenv.FreePort(t)
			h := testenv.StartHAProxy(t, testenv.HAProxyDefaults+fmt.Sprintf(`
frontend fe
  bind 127.0.0.1:%d
  default_backend be
backend be
  balance leastconn
  server s1 %s weight 10
  server s2 %s weight 10
`, front, testenv.StartDiscardServer(t), testenv.StartDiscardServer(t)))
			be := newClient(t, h.Socket).Backend("be")
			on := map[string][]net.Conn{}
			streams := map[net.Conn]Session{}
			for range 4 { // equal weights: leastconn alternates, two each
				c := dialFront(t, front)
				s := sessionOf(t, be, c)
				on[s.Server] = append(on[s.Server], c)
				streams[c] = s
			}
			require.Len(t, on["s1"], 2)
			require.Len(t, on["s2"], 2)
			require.NoError(t, be.SetWeights(testCtx(t), []weighter.Change{{Server: "s1", Weight: 1}, {Server: "s2", Weight: 100}}))

			shed := on[tc.shedFrom][0]
			require.NoError(t, be.ShutdownStream(testCtx(t), streams[shed]))
			require.NoError(t, shed.SetReadDeadline(time.Now().Add(5*time.Second)))
			_, err := shed.Read(make([]byte, 1))
			require.Error(t, err)
			require.EventuallyWithT(t, func(ct *assert.CollectT) {
				ss, err := be.Sessions(testCtx(t))
				require.NoError(ct, err)
				assert.Len(ct, ss, 3)
			}, 10*time.Second, 10*time.Millisecond, "HAProxy has let go of the shed stream")

			again := dialFront(t, front)
			got := sessionOf(t, be, again)
			assert.Equal(t, tc.wantAfter, got.Server)
		})
	}
}

// TestSessionsContextBounds checks that a dump honours the context: a
// frozen HAProxy (accepts, never answers) fails at the deadline.
func TestSessionsContextBounds(t *testing.T) {
	h := testenv.StartHAProxy(t, testenv.HAProxyDefaults+"backend be\n  server s1 127.0.0.1:1\n")
	c, err := New(Config{Socket: h.Socket, Timeout: duration.Duration(10 * time.Second)})
	require.NoError(t, err)
	h.Freeze()
	defer h.Thaw()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = c.Backend("be").Sessions(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), 5*time.Second)
}

// TestStatPlusLiveTotalsCountEveryByte: without `option contstats`, a server's
// `show stat` bin holds the bytes of its closed streams and nothing of its
// open ones, and the open streams' req totals hold the rest, so bin plus the
// live totals is a per-server byte counter that is current at every read.
func TestStatPlusLiveTotalsCountEveryByte(t *testing.T) {
	front := testenv.FreePort(t)
	h := testenv.StartHAProxy(t, testenv.HAProxyDefaults+fmt.Sprintf(`
frontend fe
  bind 127.0.0.1:%d
  default_backend be
backend be
  server s1 %s
`, front, testenv.StartDiscardServer(t)))
	c := newClient(t, h.Socket)
	be := c.Backend("be")
	counted := func() (bin uint64, live int64) {
		stats, err := c.Stats(testCtx(t), "be")
		require.NoError(t, err)
		ss, err := be.Sessions(testCtx(t))
		require.NoError(t, err)
		for _, s := range ss {
			live += s.ReqBytes
		}
		return stats[0].BytesIn, live
	}

	closed := dialFront(t, front)
	sessionOf(t, be, closed)
	_, err := closed.Write(make([]byte, 3000))
	require.NoError(t, err)
	open := dialFront(t, front)
	sessionOf(t, be, open)
	_, err = open.Write(make([]byte, 500))
	require.NoError(t, err)
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		bin, live := counted()
		assert.Equal(ct, uint64(0), bin, "nothing closed yet")
		assert.Equal(ct, int64(3500), live)
	}, 10*time.Second, 10*time.Millisecond)

	require.NoError(t, closed.Close())
	_, err = open.Write(make([]byte, 250))
	require.NoError(t, err)
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		bin, live := counted()
		assert.Equal(ct, uint64(3000), bin, "the closed stream's bytes")
		assert.Equal(ct, int64(750), live, "the open stream's bytes")
	}, 10*time.Second, 10*time.Millisecond)
}
