package daemon

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/config"
	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// The pinning tests' traffic: every client writes a chunk every
// testenv.ShedTick, a heavy one 8,000 bytes (400 kB/s), a light one 40
// (2 kB/s). Two heavies on one server make it 800 kB/s against a few kB/s
// on each of the others: a heavy is far above pin.heavy (a quarter of the
// mean server load), a light far below.
const (
	pinHeavyChunk = 8000
	pinLightChunk = 40
)

// The clients' source addresses: distinct clients to HAProxy, its stick
// table and the kernel's socket table.
var (
	pinHeavies = []string{"127.0.0.11", "127.0.0.12"}
	pinLights  = []string{"127.0.0.21", "127.0.0.22", "127.0.0.23", "127.0.0.24"}
)

// pinServers are the backend's servers, in order: their ids (server_id in
// the stick table) are 1 to 4.
var pinServers = []string{"s1", "s2", "s3", "s4"}

// pinSink is one server of the pinning tests: a TCP sink that learns which
// client a connection carries from the line the client writes first (its
// source address: HAProxy connects to the servers from its own) and counts,
// per client, the connections open to it and the bytes they carried.
type pinSink struct {
	name, addr string

	mu    sync.Mutex
	open  map[string]int
	bytes map[string]int64
	conns []net.Conn
}

// startPinSink listens on a free loopback port until the test ends.
func startPinSink(t *testing.T, name string) *pinSink {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &pinSink{name: name, addr: ln.Addr().String(), open: map[string]int{}, bytes: map[string]int64{}}
	t.Cleanup(func() {
		ln.Close()
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, c := range s.conns {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
			go s.serve(c)
		}
	}()
	return s
}

// serve reads one connection to its end: the client's line, then bytes.
func (s *pinSink) serve(c net.Conn) {
	defer c.Close()
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil {
		return
	}
	client := strings.TrimSpace(line)
	s.mu.Lock()
	s.open[client]++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.open[client]--
		s.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		s.mu.Lock()
		s.bytes[client] += int64(n)
		s.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// of returns the client's open connections to the sink and the bytes they
// carried (all its connections, closed ones too).
func (s *pinSink) of(client string) (open int, bytes int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.open[client], s.bytes[client]
}

// pinScene is a real HAProxy in front of four pinSinks (leastconn, weight
// 100 each; with the pin table or without), and the clients the test
// opened through its frontend.
type pinScene struct {
	h     *testenv.HAProxy
	front string
	sinks []*pinSink

	conns map[string]net.Conn // client → its connection
}

// startPinScene starts HAProxy version with frontend fe (option contstats:
// HAProxy's byte counters, the calibrating source, move while connections
// last) and backend be over the four sinks; table adds the pin table's two
// lines.
func startPinScene(t *testing.T, version string, table bool) *pinScene {
	t.Helper()
	sc := &pinScene{front: fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t)), conns: map[string]net.Conn{}}
	var b strings.Builder
	b.WriteString(testenv.HAProxyDefaults)
	fmt.Fprintf(&b, "frontend fe\n  bind %s\n  option contstats\n  default_backend be\nbackend be\n  balance leastconn\n", sc.front)
	if table {
		b.WriteString("  stick-table type ip size 100k expire 2h\n  stick match src\n")
	}
	for _, name := range pinServers {
		s := startPinSink(t, name)
		sc.sinks = append(sc.sinks, s)
		fmt.Fprintf(&b, "  server %s %s weight 100\n", name, s.addr)
	}
	sc.h = testenv.StartHAProxyVersion(t, version, b.String())
	return sc
}

// dial connects from src through the frontend, says src to the sink, writes
// chunk bytes every testenv.ShedTick until the connection closes or the
// test ends, and returns the server the connection went to (its sink saw
// it).
func (sc *pinScene) dial(t *testing.T, src string, chunk int) string {
	t.Helper()
	c := testenv.DialFrom(t, src, sc.front, 0)
	_, err := io.WriteString(c, src+"\n")
	require.NoError(t, err)
	testenv.WriteEvery(t, c, chunk, testenv.ShedTick)
	sc.conns[src] = c
	return sc.on(t, src)
}

// reconnect closes src's connection, waits until its server saw it end, and
// connects again from the same address: the server it lands on now.
func (sc *pinScene) reconnect(t *testing.T, src string, chunk int) string {
	t.Helper()
	sc.conns[src].Close()
	testenv.WaitFor(t, src+"'s connection closed at its server", func() bool { return sc.open(src) == 0 })
	return sc.dial(t, src, chunk)
}

// on waits until src has one connection open, to one server, and returns it.
func (sc *pinScene) on(t *testing.T, src string) string {
	t.Helper()
	var server string
	testenv.WaitFor(t, src+" connected to one server", func() bool {
		server = ""
		open := 0
		for _, s := range sc.sinks {
			if n, _ := s.of(src); n > 0 {
				server, open = s.name, open+n
			}
		}
		return open == 1
	})
	return server
}

// open counts src's connections open to the servers.
func (sc *pinScene) open(src string) int {
	n := 0
	for _, s := range sc.sinks {
		k, _ := s.of(src)
		n += k
	}
	return n
}

// sink returns the sink of server name.
func (sc *pinScene) sink(name string) *pinSink {
	i := slices.Index(pinServers, name)
	return sc.sinks[i]
}

// table reads `show table be` by hand (not through the code under test):
// client → the server its entry names (ids 1 to 4 are s1 to s4).
func (sc *pinScene) table(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for line := range strings.SplitSeq(testenv.Command(t, sc.h.Socket, "show table be"), "\n") {
		if !strings.HasPrefix(line, "0x") {
			continue
		}
		var key, id string
		for _, f := range strings.Fields(line) {
			if v, ok := strings.CutPrefix(f, "key="); ok {
				key = v
			}
			if v, ok := strings.CutPrefix(f, "server_id="); ok {
				id = v
			}
		}
		out[key] = "s" + id
	}
	return out
}

// command sends cmd to HAProxy's runtime socket, which must answer nothing
// (what `set table` and `set server` answer when they succeed).
func (sc *pinScene) command(t *testing.T, cmd string) {
	t.Helper()
	require.Empty(t, strings.TrimSpace(testenv.Command(t, sc.h.Socket, cmd)), cmd)
}

// config is the daemon's configuration of backend be behind the scene's
// HAProxy: its socket (or socket, a CommandCounter in front of it), its
// configuration file (where the daemon finds the listeners whose clients
// it measures), a cycle every 500 ms; extra ends the backend.
func (sc *pinScene) config(t *testing.T, socket, extra string) *config.Config {
	t.Helper()
	return sc.configWith(t, fmt.Sprintf("{socket: %s, config_file: %s}", socket, sc.h.Config), extra)
}

// configWith is config with the haproxy block given.
func (sc *pinScene) configWith(t *testing.T, haproxy, extra string) *config.Config {
	t.Helper()
	yml := fmt.Sprintf("listen: \"\"\ninterval: 500ms\ntimeout: 2s\njitter: 0\nhaproxy: %s\n"+
		"backends:\n  - name: be\n    source: {haproxy: {counter: bytes_in}}\n%s", haproxy, extra)
	cfg, err := config.Parse("pin.yml", []byte(yml), nil)
	require.NoError(t, err)
	return cfg
}

// pinRecord is a line of the daemon's JSON log, the fields of its pin
// lines.
type pinRecord struct {
	Level   string `json:"level"`
	Msg     string `json:"msg"`
	Client  string `json:"client"`
	Reason  string `json:"reason"`
	Fix     string `json:"fix"`
	Set     int    `json:"set"`
	Cleared int    `json:"cleared"`
	Pinned  int    `json:"pinned"`
}

func pinRecords(t *testing.T, logs *testenv.SyncBuffer) []pinRecord {
	t.Helper()
	var out []pinRecord
	for l := range strings.SplitSeq(strings.TrimSpace(logs.String()), "\n") {
		if l == "" {
			continue
		}
		var r pinRecord
		require.NoError(t, json.Unmarshal([]byte(l), &r), l)
		out = append(out, r)
	}
	return out
}

// pinFound returns the first record from the from-th on that has message
// msg, is about client and whose reason contains reason.
func pinFound(recs []pinRecord, from int, msg, client, reason string) (pinRecord, bool) {
	for _, r := range recs[min(from, len(recs)):] {
		if r.Msg == msg && r.Client == client && strings.Contains(r.Reason, reason) {
			return r, true
		}
	}
	return pinRecord{}, false
}

// pinDebugLog is a JSON log at debug level, the pin lines' (each pin is said
// at debug).
func pinDebugLog(logs *testenv.SyncBuffer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// TestPinsLive: the daemon pins heavy clients on a real HAProxy of every
// version a Debian user has. Two heavy clients sit on s1, both pinned there
// by hand (as the lottery would place them), with lights on the others:
//   - once (a dry run) says it would move one pin off s1, and writes
//     nothing;
//   - the daemon, its listeners read from haproxy.config_file, moves one
//     pin to another server (show table, read by hand); that client,
//     reconnecting from the same address, lands there (its sink sees it);
//     the other heavy and the lights keep their connections and servers,
//     and no light is pinned;
//   - an operator's drain of a pinned client's server, then an operator's
//     weight 0 of the other's: the pin leaves the server at the next cycle
//     (a pin beats drain and weight 0), and a reconnect does not land there;
//   - HAProxy restarted (an empty table, every connection closed: a
//     reconnect storm): the daemon pins every client it measured before,
//     the two heavies on two servers and no light with them, and the
//     heavies reconnecting land on their pins.
//
// The daemon's own drain (drain_above: weight 0 by its plan) cannot be
// tested here: drain_above turns the fast signal off, and with it pinning.
func TestPinsLive(t *testing.T) {
	for _, version := range testenv.HAProxyVersions() {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			checkPinsLive(t, version)
		})
	}
}

func checkPinsLive(t *testing.T, version string) {
	sc := startPinScene(t, version, true)
	for _, hv := range pinHeavies {
		sc.command(t, "set table be key "+hv+" data.server_id 1")
	}
	for _, hv := range pinHeavies {
		require.Equal(t, "s1", sc.dial(t, hv, pinHeavyChunk), "%s is pinned to s1 by hand", hv)
	}
	lightOn := map[string]string{}
	for _, l := range pinLights {
		lightOn[l] = sc.dial(t, l, pinLightChunk)
	}
	t.Logf("HAProxy %s: heavies %v on s1; lights on %v", version, pinHeavies, lightOn)
	handPins := map[string]string{pinHeavies[0]: "s1", pinHeavies[1]: "s1"}

	// once, a dry run: it says the move it would make and makes none.
	ctx := testenv.Context(t, time.Minute)
	once, err := New(sc.config(t, sc.h.Socket, ""), Options{}).RunOnce(ctx, false)
	require.NoError(t, err)
	require.Len(t, once, 1)
	require.NoError(t, once[0].Err)
	require.NotNil(t, once[0].Plan.Pins, "once planned no pins")
	lines := weighter.PinLines(once[0].Plan.Pins, true)
	t.Logf("once:\n  %s", strings.Join(lines, "\n  "))
	would := slices.IndexFunc(lines, func(l string) bool {
		return (strings.HasPrefix(l, "would move the pin of "+pinHeavies[0]+" ") ||
			strings.HasPrefix(l, "would move the pin of "+pinHeavies[1]+" ")) && strings.Contains(l, " from s1 to s")
	})
	assert.GreaterOrEqual(t, would, 0, "once does not say it would move a heavy's pin off s1")
	assert.Len(t, once[0].Plan.Pins.Changes.Set, 1, "once's plan")
	assert.Equal(t, handPins, sc.table(t), "once wrote to the table")

	// The daemon.
	var logs testenv.SyncBuffer
	cycles := runPinDaemon(t, sc.config(t, sc.h.Socket, ""), &logs)
	defer func() {
		if t.Failed() {
			t.Logf("daemon's log:\n%s", logs.String())
		}
	}()
	var table map[string]string
	testenv.WaitWithin(t, 30*time.Second, "a heavy's pin moved off s1", func() bool {
		table = sc.table(t)
		return table[pinHeavies[0]] != "s1" || table[pinHeavies[1]] != "s1"
	})
	moved, stay := pinHeavies[0], pinHeavies[1]
	if table[moved] == "s1" {
		moved, stay = stay, moved
	}
	to := table[moved]
	t.Logf("the daemon moved %s's pin to %s", moved, to)
	assert.Equal(t, map[string]string{stay: "s1", moved: to}, table, "the table: the other heavy stays, no light is pinned")
	testenv.WaitFor(t, "the move in the log", func() bool { // the cycle logs once it wrote
		_, ok := pinFound(pinRecords(t, &logs), 0, "pin", moved, "move the pin of "+moved+" ")
		return ok
	})
	assert.True(t, slices.ContainsFunc(pinRecords(t, &logs), func(r pinRecord) bool {
		return r.Msg == "pins written" && r.Set == 1 && r.Cleared == 0 && r.Pinned == 2
	}), "no info line: pins written set=1 cleared=0 pinned=2")

	// The moved client reconnects: to its new server. Nobody else moves.
	stayBytes := func() int64 { _, b := sc.sink("s1").of(stay); return b }
	before := stayBytes()
	assert.Equal(t, to, sc.reconnect(t, moved, pinHeavyChunk), "%s reconnected", moved)
	testenv.WaitFor(t, stay+" still sending to s1", func() bool { return stayBytes() > before+pinHeavyChunk })
	if n, _ := sc.sink("s1").of(stay); n != 1 {
		t.Errorf("%s has %d connections to s1, want its one", stay, n)
	}
	for _, l := range pinLights {
		if n, _ := sc.sink(lightOn[l]).of(l); n != 1 || sc.open(l) != 1 {
			t.Errorf("light %s has %d connections to %s (%d in all), want its one", l, n, lightOn[l], sc.open(l))
		}
	}
	assert.Equal(t, map[string]string{stay: "s1", moved: to}, sc.table(t))

	// An operator drains the moved client's server: the pin leaves it at
	// the next cycle, and the client reconnecting does not land there.
	withdrawn := func(server string, set, unset string) {
		t.Helper()
		var client string
		for c, s := range sc.table(t) {
			if s == server {
				client = c
			}
		}
		require.NotEmpty(t, client, "no pin on %s", server)
		mark, at := len(pinRecords(t, &logs)), cycles()
		sc.command(t, set)
		testenv.WaitWithin(t, 30*time.Second, "the pin off "+server, func() bool {
			return !slices.Contains(slices.Collect(maps.Values(sc.table(t))), server)
		})
		// The cycle under way may have read the servers before the
		// command; the next one withdraws the pin.
		assert.LessOrEqual(t, cycles(), at+2, "the pin withdrawn %v cycles after %q", cycles()-at, set)
		table := sc.table(t)
		t.Logf("after %q: pins %v", set, table)
		// The cycle logs once it wrote.
		testenv.WaitFor(t, "the withdrawal from "+server+" in the log", func() bool {
			_, ok := pinFound(pinRecords(t, &logs), mark, "pin", client, "clear the pin of "+client+" on "+server+": it cannot take a pin")
			return ok
		})
		landed := sc.reconnect(t, client, pinHeavyChunk)
		assert.NotEqual(t, server, landed, "%s reconnected to %s after %q", client, server, set)
		if s, ok := table[client]; ok {
			assert.Equal(t, s, landed, "%s is pinned to %s", client, s)
		}
		sc.command(t, unset)
	}
	withdrawn(to, "set server be/"+to+" state drain", "set server be/"+to+" state ready")
	withdrawn("s1", "set server be/s1 weight 0", "set server be/s1 weight 100")

	// Both heavies pinned again (a client that reconnected is pinned once
	// its new connection has a rate), no light: the lights are not heavy
	// against the backend's load, whichever server carries it.
	var want map[string]string
	testenv.WaitWithin(t, 30*time.Second, "both heavies pinned", func() bool {
		want = sc.table(t)
		return want[moved] != "" && want[stay] != ""
	})
	assert.Len(t, want, 2, "pins %v: a light is pinned", want)

	// HAProxy restarts: its table is empty, and every connection gone: a
	// reconnect storm. The daemon pins every client it measured before,
	// the lights too, by its last rate, heaviest first on the least loaded
	// server: the two heavies on two servers. The heavies, reconnecting,
	// land on their pins.
	mark := len(pinRecords(t, &logs))
	sc.h.Restart()
	var after map[string]string
	testenv.WaitWithin(t, 30*time.Second, "the storm's pins written", func() bool {
		after = sc.table(t)
		return after[moved] != "" && after[stay] != ""
	})
	t.Logf("pins after the restart: %v", after)
	assert.NotEqual(t, after[moved], after[stay], "the storm put both heavies on one server")
	for _, hv := range pinHeavies {
		testenv.WaitFor(t, hv+" pinned in the storm in the log", func() bool {
			_, ok := pinFound(pinRecords(t, &logs), mark, "pin", hv, "clients reconnecting at once are placed heaviest first")
			return ok
		})
	}
	testenv.WaitFor(t, "the storm's info line", func() bool {
		return slices.ContainsFunc(pinRecords(t, &logs)[mark:], func(r pinRecord) bool { return r.Msg == "reconnect storm pinned" })
	})
	for _, l := range pinLights {
		if s, ok := after[l]; ok {
			assert.NotContains(t, []string{after[moved], after[stay]}, s, "light %s pinned with a heavy", l)
		}
	}
	for _, hv := range pinHeavies {
		assert.Equal(t, after[hv], sc.reconnect(t, hv, pinHeavyChunk), "%s reconnected after the restart", hv)
	}
}

// TestPinsLiveWhereTheySit: on every HAProxy version, two heavy clients
// that leastconn placed on two servers, lights on the others, the clients
// measured on pin.listeners: the daemon pins each where it sits (a pin elsewhere would move it at its next
// reconnect, for nothing). On the socket table's reader the Pinner learns
// where a client sits from the connections the reader lists, which it
// listed for a shedding backend only: every heavy sat nowhere known and
// was pinned to a light server.
func TestPinsLiveWhereTheySit(t *testing.T) {
	for _, version := range testenv.HAProxyVersions() {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			sc := startPinScene(t, version, true)
			// Rates 400 and 250 kB/s: the Pinner tells where a client
			// sits by its rate, and cannot tell two clients of one rate
			// apart (they may be taken for each other).
			sits := map[string]string{}
			for i, hv := range pinHeavies {
				sits[hv] = sc.dial(t, hv, pinHeavyChunk-3000*i)
			}
			require.NotEqual(t, sits[pinHeavies[0]], sits[pinHeavies[1]], "leastconn placed both heavies on one server")
			for _, l := range pinLights[:2] {
				sc.dial(t, l, pinLightChunk)
			}
			var logs testenv.SyncBuffer
			defer func() {
				if t.Failed() {
					t.Logf("daemon's log:\n%s", logs.String())
				}
			}()
			// The listeners from pin.listeners, not HAProxy's file.
			cfg := sc.configWith(t, "{socket: "+sc.h.Socket+"}", "    pin: {listeners: [\""+sc.front+"\"]}\n")
			runDaemon(t, New(cfg, Options{Log: pinDebugLog(&logs)}))
			var table map[string]string
			testenv.WaitWithin(t, 30*time.Second, "both heavies pinned", func() bool {
				table = sc.table(t)
				return len(table) >= 2
			})
			t.Logf("HAProxy %s: heavies on %v, pinned to %v", version, sits, table)
			assert.Equal(t, sits, table)
			for _, hv := range pinHeavies {
				testenv.WaitFor(t, hv+" pinned where it sits, in the log", func() bool {
					_, ok := pinFound(pinRecords(t, &logs), 0, "pin", hv, "to "+sits[hv]+", where it sits")
					return ok
				})
			}
		})
	}
}

// TestPinsLiveOff: on every HAProxy version, a backend without the pin
// table is weighted as ever (weights written) and the log says once, with
// the two lines to add, that its clients are not pinned; with `pin: false`
// on a backend that has the table, nothing is said of pins and HAProxy is
// never asked for its table, nor written to it.
func TestPinsLiveOff(t *testing.T) {
	for _, version := range testenv.HAProxyVersions() {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			t.Run("no table", func(t *testing.T) { checkPinsNoTable(t, version) })
			t.Run("pin false", func(t *testing.T) { checkPinsFalse(t, version) })
		})
	}
}

// pinTraffic opens a heavy client and three lights: loads the weights
// answer.
func pinTraffic(t *testing.T, sc *pinScene) {
	t.Helper()
	sc.dial(t, pinHeavies[0], pinHeavyChunk)
	for _, l := range pinLights[:3] {
		sc.dial(t, l, pinLightChunk)
	}
}

// runPinDaemon runs the daemon on cfg, logging to logs, until the test
// ends; it returns a count of its successful cycles.
func runPinDaemon(t *testing.T, cfg *config.Config, logs *testenv.SyncBuffer) func() float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	runDaemon(t, New(cfg, Options{Log: pinDebugLog(logs), Registry: reg}))
	return func() float64 {
		v, _ := seriesValue(t, reg, "haproxy_weighter_cycles_total", map[string]string{"backend": "be", "result": "ok"})
		return v
	}
}

// weightsWritten waits until the daemon wrote weights (one moved off the
// configured 100), then for five more cycles.
func weightsWritten(t *testing.T, sc *pinScene, cycles func() float64) {
	t.Helper()
	testenv.WaitWithin(t, 30*time.Second, "weights written", func() bool {
		return slices.ContainsFunc(slices.Collect(maps.Values(testenv.Weights(t, sc.h.Socket, "be"))), func(w int) bool { return w != 100 })
	})
	start := cycles()
	testenv.WaitWithin(t, 30*time.Second, "five more cycles", func() bool { return cycles() >= start+5 })
}

func checkPinsNoTable(t *testing.T, version string) {
	sc := startPinScene(t, version, false)
	pinTraffic(t, sc)
	var logs testenv.SyncBuffer
	defer func() {
		if t.Failed() {
			t.Logf("daemon's log:\n%s", logs.String())
		}
	}()
	weightsWritten(t, sc, runPinDaemon(t, sc.config(t, sc.h.Socket, ""), &logs))
	t.Logf("HAProxy %s without the table: weights %v", version, testenv.Weights(t, sc.h.Socket, "be"))
	var said []pinRecord
	for _, r := range pinRecords(t, &logs) {
		if r.Msg == "clients not pinned" {
			said = append(said, r)
		}
		assert.NotContains(t, []string{"pins written", "pinning heavy clients", "pin table not read", "clients not measured"}, r.Msg)
	}
	require.Len(t, said, 1, "clients not pinned, said once")
	assert.Equal(t, "INFO", said[0].Level)
	assert.Contains(t, said[0].Fix, "stick-table type ip size 100k expire 2h")
	assert.Contains(t, said[0].Fix, "stick match src")
	assert.Contains(t, said[0].Reason, "no stick table")
}

func checkPinsFalse(t *testing.T, version string) {
	sc := startPinScene(t, version, true)
	sc.command(t, "set table be key "+pinHeavies[1]+" data.server_id 2")
	pinTraffic(t, sc)
	counted := testenv.StartCommandCounter(t, sc.h.Socket)
	var logs testenv.SyncBuffer
	defer func() {
		if t.Failed() {
			t.Logf("daemon's log:\n%s", logs.String())
		}
	}()
	weightsWritten(t, sc, runPinDaemon(t, sc.config(t, counted.Socket, "    pin: false\n"), &logs))
	for _, r := range pinRecords(t, &logs) {
		if strings.Contains(r.Msg, "pin") || strings.Contains(r.Msg, "clients") {
			t.Errorf("pin: false, and the log says %q (%s)", r.Msg, r.Reason)
		}
	}
	for _, cmd := range []string{"show table", "set table", "clear table"} {
		assert.Zero(t, counted.Count(cmd), "HAProxy was sent %s", cmd)
	}
	assert.Equal(t, map[string]string{pinHeavies[1]: "s2"}, sc.table(t), "the table as the operator left it")
	t.Logf("HAProxy %s, pin: false: weights %v; %d commands, none about the table", version,
		testenv.Weights(t, sc.h.Socket, "be"), len(counted.Lines()))
}

// TestPinsConnsListedWithATable: the socket table reader lists a backend's
// connections for the Pinner while the backend has a pin table, and stops
// once a cycle found it has none (every HAProxy backend has a Pinner by
// default: one without the table would pay the list at every read).
func TestPinsConnsListedWithATable(t *testing.T) {
	for _, table := range []bool{true, false} {
		t.Run(fmt.Sprintf("table %v", table), func(t *testing.T) {
			sc := startPinScene(t, testenv.DefaultHAProxyVersion, table)
			on := sc.dial(t, pinHeavies[0], pinHeavyChunk)
			units, err := Build(sc.config(t, sc.h.Socket, ""), slog.New(slog.DiscardHandler))
			require.NoError(t, err)
			t.Cleanup(func() { closeAll(units) })
			require.Len(t, units, 1)
			u := units[0]
			ctx := testenv.Context(t, 30*time.Second)
			// Until the heavy's connection is measured (the reader's
			// second read), then two cycles more.
			var listed []int
			testenv.WaitWithin(t, 20*time.Second, "three cycles with the heavy measured", func() bool {
				time.Sleep(200 * time.Millisecond) // a read spanning some of its traffic
				c := u.CheckedCycle(ctx, time.Now(), false)
				require.NoError(t, c.Err)
				if c.Signal == nil || !(c.Signal.Servers[on].Local > 0) {
					return false
				}
				require.NotNil(t, c.Plan.Pins)
				require.Equal(t, !table, c.Plan.Pins.NoTable)
				listed = append(listed, len(c.Signal.Sessions))
				return len(listed) == 3
			})
			t.Logf("table %v: connections listed at each cycle: %v", table, listed)
			for i, n := range listed[1:] {
				if table {
					assert.Equal(t, 1, n, "cycle %d: the heavy's connection listed", i+2)
				} else {
					assert.Zero(t, n, "cycle %d: connections listed without a pin table", i+2)
				}
			}
		})
	}
}
