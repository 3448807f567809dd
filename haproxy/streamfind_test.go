package haproxy

import (
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
)

// peerRecorder is a sink server that remembers the peer address of each
// connection it accepts: HAProxy's side of its connection to the server,
// the address the socket table lists it by.
type peerRecorder struct {
	addr  string
	mu    sync.Mutex
	peers []netip.AddrPort
}

func startPeerRecorder(t *testing.T) *peerRecorder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	r := &peerRecorder{addr: ln.Addr().String()}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			r.mu.Lock()
			r.peers = append(r.peers, c.RemoteAddr().(*net.TCPAddr).AddrPort())
			r.mu.Unlock()
			t.Cleanup(func() { c.Close() })
			go func() { _, _ = io.Copy(io.Discard, c) }()
		}
	}()
	return r
}

func (r *peerRecorder) seen() []netip.AddrPort {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]netip.AddrPort(nil), r.peers...)
}

// TestServerStreamsByServerSide: on every HAProxy version, a server's
// streams are found by HAProxy's side of their server connection (what
// the server sees as its peer, and the socket table as the local address),
// each with its own client; other servers' and other backends' streams are
// not; 3.2 and later are sent the server-filtered dump, older versions the
// whole one. ServerAddrs and ServerSessions give a read's addresses and
// scur, and Processes HAProxy's pid.
func TestServerStreamsByServerSide(t *testing.T) {
	for _, version := range testenv.HAProxyVersions() {
		t.Run(version, func(t *testing.T) {
			s1, s2, other := startPeerRecorder(t), startPeerRecorder(t), startPeerRecorder(t)
			fe, feOther := testenv.FreePort(t), testenv.FreePort(t)
			h := testenv.StartHAProxyVersion(t, version, testenv.HAProxyDefaults+fmt.Sprintf(`
frontend fe
  bind 127.0.0.1:%d
  default_backend be_app
frontend fe_other
  bind 127.0.0.1:%d
  default_backend be_other
backend be_app
  balance roundrobin
  server s1 %s
  server s2 %s
  server nowhere 0.0.0.0:0 disabled
backend be_other
  server s1 %s
`, fe, feOther, s1.addr, s2.addr, other.addr))
			c := newClient(t, h.Socket)
			var clients []net.Conn
			dial := func(port int) {
				conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
				require.NoError(t, err)
				t.Cleanup(func() { conn.Close() })
				_, err = conn.Write([]byte("x")) // HAProxy connects to a server on the first byte
				require.NoError(t, err)
				clients = append(clients, conn)
			}
			for range 6 {
				dial(fe)
			}
			dial(feOther)
			testenv.WaitFor(t, "every connection at its server", func() bool {
				return len(s1.seen()) == 3 && len(s2.seen()) == 3 && len(other.seen()) == 1
			})
			b := c.Backend("be_app")
			servers, err := b.Servers(testCtx(t))
			require.NoError(t, err)
			addrs := ServerAddrs(servers)
			assert.Equal(t, map[string]netip.AddrPort{"s1": netip.MustParseAddrPort(s1.addr), "s2": netip.MustParseAddrPort(s2.addr)}, addrs,
				"a server without an address is left out")
			assert.Equal(t, 3, ServerSessions(servers)["s1"])

			got, err := b.ServerStreams(testCtx(t), "s1")
			require.NoError(t, err)
			want := "show sess all"
			if version >= "3.2" {
				want = "show sess all server be_app/s1"
			}
			assert.Equal(t, want, got.Command)
			t.Logf("HAProxy %s: %s: %d streams in %d bytes", version, got.Command, got.Total, got.Bytes)
			require.Len(t, got.Streams, 3, "s1's streams only")
			clientOf := map[string]bool{}
			for _, conn := range clients {
				clientOf[conn.LocalAddr().String()] = true
			}
			for _, peer := range s1.seen() {
				s, ok := got.Streams[ServerConn{Local: peer, Remote: netip.MustParseAddrPort(s1.addr)}]
				if assert.True(t, ok, "no stream for s1's peer %s in %v", peer, got.Streams) {
					assert.Equal(t, "s1", s.Server)
					assert.Equal(t, "be_app", s.Backend)
					assert.True(t, clientOf[s.Client], "stream %s: client %s is not one of the test's", s.ID, s.Client)
					assert.NotZero(t, s.Serial)
				}
			}
			all, err := b.ServerStreams(testCtx(t), "")
			require.NoError(t, err)
			assert.Len(t, all.Streams, 6, "every server's streams of the backend, not be_other's")
			if version >= "3.2" {
				assert.Equal(t, "show sess all backend be_app", all.Command)
			}

			pids, err := c.Processes(testCtx(t))
			require.NoError(t, err)
			assert.Equal(t, []int{h.PID()}, pids)
			peer, ok, err := c.SocketPeer(testCtx(t))
			require.NoError(t, err)
			assert.True(t, ok)
			assert.Equal(t, h.PID(), peer, "the socket's listener, HAProxy itself without a master")
		})
	}
}

// TestProcessesThroughTheMaster: through the master CLI, Processes lists
// the current worker first and, after a reload, the old worker that still
// holds a connection.
func TestProcessesThroughTheMaster(t *testing.T) {
	srv := startPeerRecorder(t)
	fe := testenv.FreePort(t)
	h := testenv.StartHAProxyMaster(t, testenv.HAProxyDefaults+fmt.Sprintf(`
frontend fe
  bind 127.0.0.1:%d
  default_backend be
backend be
  server s1 %s
`, fe, srv.addr))
	c, err := New(Config{Socket: h.Socket, Master: true})
	require.NoError(t, err)
	first := h.Worker()
	pids, err := c.Processes(testCtx(t))
	require.NoError(t, err)
	assert.Equal(t, []int{first}, pids)
	peer, ok, err := c.SocketPeer(testCtx(t))
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, parentOf(t, first), peer, "the master CLI's listener is the master, the worker's parent")

	conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", fe))
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.Write([]byte("x"))
	require.NoError(t, err)
	testenv.WaitFor(t, "the connection at the server", func() bool { return len(srv.seen()) == 1 })
	second := h.Reload()
	pids, err = c.Processes(testCtx(t))
	require.NoError(t, err)
	assert.Equal(t, []int{second, first}, pids, "the current worker, then the old one holding the connection")
}

// TestAddrTapOnCaptures: the tap finds HAProxy's side and the server's of
// every connected stream of the captured dumps of each version, and
// nothing for streams of other backends.
func TestAddrTapOnCaptures(t *testing.T) {
	files := []string{filepath.Join("..", "testdata", "haproxy-2.6.12", "show-sess-all.txt")}
	for _, v := range []string{"3.0.11", "3.2.26", "3.4.7"} {
		files = append(files, filepath.Join("testdata", "show-sess-all-"+v+".txt"))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			raw, err := os.ReadFile(f)
			require.NoError(t, err)
			tap := &addrTap{r: &oneByteReader{data: raw}, backend: []byte("be_app")}
			d, err := parseSessionDump(tap, maxSessionDump, func(s *Session) bool { return s.Backend == "be_app" && s.Server != "" })
			require.NoError(t, err)
			require.NotEmpty(t, d.sessions)
			for _, s := range d.sessions {
				side := tap.side[s.ID]
				assert.True(t, side.Local.IsValid() && side.Remote.IsValid(), "stream %s: %+v", s.ID, side)
				assert.True(t, side.Local.Addr().IsLoopback())
			}
			for id := range tap.side {
				assert.Contains(t, string(raw), id+": ")
			}
		})
	}
}

// oneByteReader returns its data a byte at a time: the tap must join lines
// across reads.
type oneByteReader struct {
	data []byte
}

func (r *oneByteReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	p[0] = r.data[0]
	r.data = r.data[1:]
	return 1, nil
}

// parentOf is pid's parent, from /proc.
func parentOf(t *testing.T, pid int) int {
	t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	require.NoError(t, err)
	s := string(raw)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	ppid, err := strconv.Atoi(f[1])
	require.NoError(t, err)
	return ppid
}
