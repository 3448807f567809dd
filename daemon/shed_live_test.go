package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/config"
	"github.com/haproxy-weighter/haproxy-weighter/haproxy"
	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// The whale test's traffic: every client writes a chunk every testenv.ShedTick;
// ordinary clients shedOrdinary bytes, the whale 50 times that.
const (
	shedOrdinary = 20 // bytes per tick: 1,000 B/s
	shedWhale    = 50 * shedOrdinary
	// shedPerServer ordinary clients per server, before the test closes
	// those of one server (connections leave).
	shedPerServer = 20
)

// streamsByClient reads the backend's streams and maps each client address
// (as the client sees its own local address) to its stream.
func streamsByClient(t *testing.T, b *haproxy.RuntimeBackend) map[string]haproxy.Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ss, err := b.Sessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]haproxy.Session{}
	for _, s := range ss {
		out[s.Client] = s
	}
	return out
}

// waitStreams waits until every client has its stream on a server.
func waitStreams(t *testing.T, b *haproxy.RuntimeBackend, clients []*testenv.ShedClient) map[string]haproxy.Session {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := streamsByClient(t, b)
		missing := 0
		for _, c := range clients {
			if got[c.Conn.LocalAddr().String()].Server == "" {
				missing++
			}
		}
		if missing == 0 {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d clients have no stream on a server", missing, len(clients))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// shedRecord is a log record of session shedding (JSON handler).
type shedRecord struct {
	Msg     string  `json:"msg"`
	Reason  string  `json:"reason"`
	Session string  `json:"session"`
	Server  string  `json:"server"`
	Client  string  `json:"client"`
	Rate    float64 `json:"rate_bytes_per_second"`
	Ratio   float64 `json:"load_ratio"`
}

// shedRecords returns, in order, the records the daemon wrote about
// shedding: one per cycle ("no session shed" at debug, or a shed).
func shedRecords(t *testing.T, logs *testenv.SyncBuffer) []shedRecord {
	t.Helper()
	var out []shedRecord
	sc := bufio.NewScanner(strings.NewReader(logs.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r shedRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		switch r.Msg {
		case "no session shed", "session shed", "would shed session", "session to shed already ended", "session shed failed":
			out = append(out, r)
		}
	}
	return out
}

// TestShedMovesTheWhale: a real HAProxy with four sink servers under
// leastconn; a client sending 50 times what each ordinary client sends lands
// on one (s1 as a rule); the ordinary clients of another leave. With shed on, the daemon closes
// that one session within its `for` cycles; the client sees the close,
// reconnects, and leastconn places it on another server; no other session is
// touched. once without --apply closes nothing, and a shed of a session that
// ended meanwhile is a no-op.
func TestShedMovesTheWhale(t *testing.T) {
	front, hcfg, servers := shedBackendConfig(t)
	h := testenv.StartHAProxy(t, hcfg)
	hc, err := haproxy.New(haproxy.Config{Socket: h.Socket})
	if err != nil {
		t.Fatal(err)
	}
	hb := hc.Backend("be")

	sc := openWhaleScene(t, front, hb, servers)
	whale, whaleStream, hot, staying := sc.whale, sc.whaleStream, sc.hot, sc.staying
	t.Logf("the whale is on %s; the ordinary clients of %s left", hot, sc.empty)
	before := waitStreams(t, hb, staying)

	const shedYAML = "    shed: {above: 2.2, for: %d, max_per_minute: 2, max_share: 0.02, min_age: 1s, cooldown: 2m, progress: 0.2}\n"
	cfgFor := func(forCycles int) *config.Config {
		yml := fmt.Sprintf("listen: \"\"\ninterval: 1s\njitter: 0\nhaproxy: {socket: %s}\nbackends:\n  - name: be\n"+
			"    source: {haproxy: {counter: bytes_in}}\n"+shedYAML, h.Socket, forCycles)
		cfg, err := config.Parse("shed.yml", []byte(yml), nil)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	// Let every stream be listed by two dumps a second apart before once reads.
	time.Sleep(time.Second)

	// once, without --apply, with for: 1 (one cycle can then plan a shed):
	// it names the whale and closes nothing.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cycles, err := New(cfgFor(1), Options{}).RunOnce(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	c := cycles[0]
	if c.Err != nil || c.Plan.Shed == nil || len(c.Plan.Shed.Sheds) != 1 {
		t.Fatalf("once: err %v, shed plan %+v", c.Err, c.Plan.Shed)
	}
	would := c.Plan.Shed.Sheds[0]
	t.Logf("once: %s", would.DryRun())
	wantLine := fmt.Sprintf("would shed session %s (client %s, ", whaleStream.ID, whaleStream.Client)
	if !strings.HasPrefix(would.DryRun(), wantLine) || !strings.Contains(would.DryRun(), " B/s, age ") ||
		!strings.Contains(would.DryRun(), ") from "+hot+": ") {
		t.Errorf("once says %q, want it to start %q and name the rate, age and %s", would.DryRun(), wantLine, hot)
	}
	if c.Sheds != nil {
		t.Errorf("once without --apply tried to close: %+v", c.Sheds)
	}
	time.Sleep(200 * time.Millisecond) // a close would have reached the client by now
	if whale.Closed.Load() {
		t.Fatal("once without --apply closed the whale's session")
	}
	if after := streamsByClient(t, hb); !sameStreams(before, after, staying) || after[whale.Conn.LocalAddr().String()].Serial != whaleStream.Serial {
		t.Fatal("once without --apply changed the backend's streams")
	}

	// The daemon, with for: 2.
	var logs testenv.SyncBuffer
	reg := prometheus.NewRegistry()
	log := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	// With restore_on_exit, whose wrapper around the target must still let
	// the daemon close sessions (it once did not: every shed was cancelled).
	runCfg := cfgFor(2)
	runCfg.RestoreOnExit = true
	d := New(runCfg, Options{Log: log, Registry: reg})
	runCtx, stop := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- d.Run(runCtx, nil) }()
	defer func() {
		stop()
		if err := <-ran; err != nil {
			t.Errorf("daemon: %v", err)
		}
	}()

	// The whale sees its connection closed, and reconnects.
	select {
	case <-whale.Done:
	case <-time.After(30 * time.Second):
		t.Fatalf("the whale was not shed within 30 s; shedding said:\n%s", recordsText(shedRecords(t, &logs)))
	}
	again := testenv.DialShedClient(t, front, shedWhale)
	// The cycle logs when it ends, after the close.
	var recs []shedRecord
	shedAt := -1
	testenv.WaitFor(t, "the shed in the log", func() bool {
		recs = shedRecords(t, &logs)
		shedAt = slices.IndexFunc(recs, func(r shedRecord) bool { return r.Msg == "session shed" })
		return shedAt >= 0
	})
	shed := recs[shedAt]
	t.Logf("shed in cycle %d (for: 2): %s; rate %.0f B/s, %s at %.2f× the mean; before it:\n%s",
		shedAt+1, shed.Reason, shed.Rate, hot, shed.Ratio, recordsText(recs[:shedAt]))
	if shed.Session != whaleStream.ID || shed.Client != whaleStream.Client || shed.Server != hot {
		t.Errorf("shed %s (client %s) from %s, want the whale %s (client %s) from %s", shed.Session, shed.Client, shed.Server,
			whaleStream.ID, whaleStream.Client, hot)
	}
	// The first cycle can have no rate yet (it shares the start-up read's
	// dump), then hot must be hot for two reads: the third read at the
	// latest. A cycle that got no new dump (the dumps are spaced by at least
	// a second, the interval) does not count.
	reads := 0
	for _, r := range recs[:shedAt+1] {
		if !strings.HasPrefix(r.Reason, "no new show sess dump") {
			reads++
		}
	}
	if reads > 3 {
		t.Errorf("shed at the %d-th cycle with a new read, want within for (2) + 1", reads)
	}

	// The reconnection lands on another server (the empty one, by
	// leastconn).
	moved := waitStreams(t, hb, []*testenv.ShedClient{again})[again.Conn.LocalAddr().String()]
	t.Logf("the whale reconnected to %s", moved.Server)
	if moved.Server == hot {
		t.Errorf("the whale's reconnection went back to %s", hot)
	}

	// Nothing else is touched, for several cycles more.
	n := len(shedRecords(t, &logs))
	testenv.WaitFor(t, "three more cycles", func() bool { return len(shedRecords(t, &logs)) >= n+3 })
	recs = shedRecords(t, &logs)
	for _, r := range recs[shedAt+1:] {
		if r.Msg != "no session shed" {
			t.Errorf("after the whale: %s %s (%s)", r.Msg, r.Session, r.Reason)
		}
	}
	for i, c := range staying {
		if c.Closed.Load() {
			t.Errorf("ordinary client %d (%s) was closed", i, c.Conn.LocalAddr())
		}
	}
	if after := streamsByClient(t, hb); !sameStreams(before, after, staying) {
		t.Error("an ordinary client's stream changed")
	}
	if v := counterValue(t, reg, "haproxy_weighter_sessions_shed_total", hot); v != 1 {
		t.Errorf("sessions_shed_total{server=%s} = %v, want 1", hot, v)
	}
	if v := counterValue(t, reg, "haproxy_weighter_sessions_shed_rate_bytes_per_second_total", hot); math.Abs(v-shed.Rate) > 0.5 {
		t.Errorf("sessions_shed_rate_bytes_per_second_total{server=%s} = %v, want the shed's %v (logged rounded)", hot, v, shed.Rate)
	}

	// A shed of a session that ended meanwhile closes nothing and is no
	// failure: the whale's old session is gone.
	err = hb.CloseSession(ctx, weighter.ShedSession{ID: whaleStream.ID, Serial: whaleStream.Serial, Server: hot})
	if !errors.Is(err, weighter.ErrSessionGone) {
		t.Errorf("closing the ended session: %v, want ErrSessionGone", err)
	}
	if after := streamsByClient(t, hb); !sameStreams(before, after, staying) ||
		after[again.Conn.LocalAddr().String()].Serial != moved.Serial {
		t.Error("closing an ended session changed the backend's streams")
	}
}

// sameStreams reports whether every client of clients has the same stream
// (ID and serial) in a as in b.
func sameStreams(a, b map[string]haproxy.Session, clients []*testenv.ShedClient) bool {
	for _, c := range clients {
		k := c.Conn.LocalAddr().String()
		if x, y := a[k], b[k]; x.ID != y.ID || x.Serial != y.Serial || y.Serial == 0 {
			return false
		}
	}
	return true
}

func recordsText(recs []shedRecord) string {
	var b strings.Builder
	for i, r := range recs {
		fmt.Fprintf(&b, "  cycle %d: %s: %s\n", i+1, r.Msg, r.Reason)
	}
	return b.String()
}

// counterValue returns the value of the counter name for backend be and server.
func counterValue(t *testing.T, reg *prometheus.Registry, name, server string) float64 {
	t.Helper()
	s := testenv.Series(t, reg, name, map[string]string{"backend": "be", "server": server})
	if len(s) == 0 {
		t.Fatalf("no %s{backend=be,server=%s}", name, server)
	}
	return s[0].GetCounter().GetValue()
}

// whaleScene is the shedding tests' backend of four servers behind front
// (leastconn): the whale and 19 ordinary clients on hot, 20 on each of two
// others, none on empty. Loads 69 : 20 : 20 : 0 (mean 27.25): hot is 2.5×
// the mean, and the whale fits on empty under 2.2× the mean; moving any
// ordinary client would not be worth it.
type whaleScene struct {
	whale       *testenv.ShedClient
	whaleStream haproxy.Session
	hot, empty  string
	staying     []*testenv.ShedClient // the ordinary clients still connected
}

// openWhaleScene opens the whale first, to the server leastconn picks of
// the empty ones (hot; s1 as a rule), then the ordinary clients one at a
// time (hot gets one fewer than the others), and closes those of another
// server (empty).
func openWhaleScene(t *testing.T, front string, hb *haproxy.RuntimeBackend, servers []string) whaleScene {
	t.Helper()
	whale := testenv.DialShedClient(t, front, shedWhale)
	var ordinary []*testenv.ShedClient
	for range 4*shedPerServer - 1 {
		ordinary = append(ordinary, testenv.DialShedClient(t, front, shedOrdinary))
		time.Sleep(5 * time.Millisecond)
	}
	placed := waitStreams(t, hb, append([]*testenv.ShedClient{whale}, ordinary...))
	sc := whaleScene{whale: whale, whaleStream: placed[whale.Conn.LocalAddr().String()]}
	sc.hot, sc.empty = sc.whaleStream.Server, servers[len(servers)-1]
	if sc.empty == sc.hot {
		sc.empty = servers[0]
	}
	for _, c := range ordinary {
		if placed[c.Conn.LocalAddr().String()].Server == sc.empty {
			c.Conn.Close()
			<-c.Done
		} else {
			sc.staying = append(sc.staying, c)
		}
	}
	require.Len(t, sc.staying, 3*shedPerServer-1, "ordinary clients outside %s: leastconn did not spread them evenly", sc.empty)
	return sc
}

// shedBackendConfig is the HAProxy configuration of the shedding tests:
// frontend fe on front, backend be balancing leastconn over four servers
// (each a discard sink, weight 100).
func shedBackendConfig(t *testing.T) (front, cfg string, servers []string) {
	t.Helper()
	front = fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	var b strings.Builder
	b.WriteString(testenv.HAProxyDefaults)
	fmt.Fprintf(&b, "frontend fe\n  bind %s\n  default_backend be\nbackend be\n  balance leastconn\n", front)
	servers = []string{"s1", "s2", "s3", "s4"}
	for _, s := range servers {
		fmt.Fprintf(&b, "  server %s %s weight 100\n", s, testenv.StartDiscardServer(t))
	}
	return front, b.String(), servers
}
