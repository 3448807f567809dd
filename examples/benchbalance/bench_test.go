package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/config"
	"github.com/haproxy-weighter/haproxy-weighter/sim"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// The harness runs what the README's Quick start says: the flags it reads from there
// must be a Prometheus source this harness serves.
func TestQuickStartFromREADME(t *testing.T) {
	qs, err := readQuickStart("../../README.md", "run")
	if err != nil {
		t.Fatal(err)
	}
	if err := checkQuickStart(qs); err != nil {
		t.Fatal(err)
	}
	if qs.Args[0] != "run" || slices.Contains(qs.Args, "--config") {
		t.Errorf("args = %q, want run with the quick start's flags", qs.Args)
	}
	args := weighterArgs(qs.Args, "/x/weighted.sock", "http://127.0.0.1:1", "127.0.0.1:2")
	for f, want := range map[string]string{"--socket": "/x/weighted.sock", "--prometheus-url": "http://127.0.0.1:1", "--listen": "127.0.0.1:2"} {
		if v, _ := flagValue(args, f); v != want {
			t.Errorf("%s = %q, want %q (args %q)", f, v, want, args)
		}
	}
	for _, f := range []string{"--backend", "--query", "--server-label"} {
		a, _ := flagValue(qs.Args, f)
		b, _ := flagValue(args, f)
		if a != b {
			t.Errorf("%s changed from %q to %q", f, a, b)
		}
	}
}

func TestParseQuickStart(t *testing.T) {
	readme := "# x\n\n## Quick start\n\nText.\n\n```console\n$ haproxy-weighter once --socket /s --backend be \\\n" +
		"    --query 'rate(x[1m])' --apply --output json --server-label \"server\"\n```\n\n" +
		"```sh\nhaproxy-weighter run --backend other --interval 5s\n```\n\n## Next\n\n```\nhaproxy-weighter once --backend wrong\n```\n"
	qs, err := parseQuickStart(readme, "once")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"run", "--socket", "/s", "--backend", "be", "--query", "rate(x[1m])", "--server-label", "server"}
	if !slices.Equal(qs.Args, want) {
		t.Errorf("once: %q, want %q", qs.Args, want)
	}
	qs, err = parseQuickStart(readme, "run")
	if err != nil || !slices.Equal(qs.Args, []string{"run", "--backend", "other", "--interval", "5s"}) {
		t.Errorf("run: %q, %v", qs.Args, err)
	}
	if _, err := parseQuickStart("## Quick start\n\nnone\n", "once"); err == nil {
		t.Error("no command: no error")
	}
}

func TestShellWords(t *testing.T) {
	got, err := shellWords(`a 'b c' "d \"e\"" f\ g`)
	if want := []string{"a", "b c", `d "e"`, "f g"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("shellWords = %q, %v; want %q", got, err, want)
	}
	if _, err := shellWords("a 'b"); err == nil {
		t.Error("unterminated quote: no error")
	}
}

func TestWindowRatiosAndGap(t *testing.T) {
	// Control: server 1 gets 3 of 4 datapoints (max/mean 1.5); weighted 1.2; oracle even.
	var snaps []snapshot
	for s := range 41 {
		sn := snapshot{T: time.Duration(s) * time.Second, Lines: make([][]int64, len(labArms))}
		n := int64(s)
		sn.Lines[armControl] = []int64{3 * n, n}
		sn.Lines[armWeighted] = []int64{12 * n, 8 * n}
		sn.Lines[armOracle] = []int64{n, n}
		snaps = append(snaps, sn)
	}
	r := windowRatios(snaps, armControl, 10*time.Second, 40*time.Second, 10*time.Second)
	if len(r) != 3 || math.Abs(r[0]-1.5) > 1e-9 {
		t.Errorf("control windows = %v, want three of 1.5", r)
	}
	f := figuresOf("1", len(labArms), snaps, 10*time.Second, 40*time.Second, 10*time.Second)
	if g := gapClosed(f.P50[armControl], f.P50[armOracle], f.P50[armWeighted]); math.Abs(g-0.6) > 1e-9 {
		t.Errorf("gap closed = %v, want 0.6", g)
	}
	if g := gapClosed(1.2, 1.2, 1.1); !math.IsNaN(g) {
		t.Errorf("no gap: %v, want NaN", g)
	}
	if q := sim.Quantile([]float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, 0.9); q != 10 {
		t.Errorf("p90 = %v, want 10", q)
	}
}

func TestOraclePlacesOnLeastLoad(t *testing.T) {
	o := newOracle([]string{"a", "b", "c"})
	a, relA := o.place(100)
	b, _ := o.place(10)
	c, _ := o.place(1)
	d, _ := o.place(5) // c (1) is the lightest
	if a != "a" || b != "b" || c != "c" || d != "c" {
		t.Errorf("placed %s %s %s %s, want a b c c", a, b, c, d)
	}
	relA()
	relA() // once only
	if e, _ := o.place(50); e != "a" || o.load[0] != 50 {
		t.Errorf("after a's connection ended: placed %s, load %v", e, o.load)
	}
}

// TestSmokeRun runs the whole harness for one short seed of each scenario the bench
// prints: real HAProxies, Prometheus and the daemon built from this tree. It checks that
// it runs, prints the figures and leaves no process behind, nothing about how even the
// loads are (the production scenario runs 16 s with its burst at 5 s, not 6 min).
func TestSmokeRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real HAProxy and Prometheus for ~1 min")
	}
	tmp := t.TempDir()
	bin := os.Getenv("BENCH_BALANCE_WEIGHTER") // a binary built already, instead of this tree's
	if bin == "" {
		bin = filepath.Join(tmp, "haproxy-weighter")
		build := exec.Command("go", "build", "-o", bin, "./cmd/haproxy-weighter")
		build.Dir = "../.."
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		out, err := build.CombinedOutput()
		require.NoError(t, err, "build:\n%s", out)
	}
	for _, tc := range []struct {
		scenario string
		args     []string
		want     []string
	}{
		{scenarioLab, []string{"-conns", "60"},
			[]string{"control p50 / p90", "gap closed p50 / p90", "\n1      ", "run --socket", "--query 'rate(datapoints_received_total", "fast signal reader kernel"}},
		{scenarioBurst, []string{"-conns", "40", "-burst-at", "5s", "-heavy-rate", "600"},
			[]string{"leastconn p50 / p90", "shed p50 / p90", "gap closed shed", "lines lost", "sheds/h/server",
				"shed: {above: 1.5}", "\n1      default ", "\n1      shed  ", "kernel", "run --socket", "--query 'rate(datapoints_received_total",
				"pin+shed p50 / p90", "gap closed pin+shed", "\n1      pin  ", "\n1      pin+shed ", "--haproxy-config <the arm's haproxy.cfg>",
				"pins, pin: ", "pins, pin+shed: ", "pins per server"}},
		{scenarioMany, []string{"-conns", "40"},
			[]string{"scenario many", "many: 40 clients: -conns", "leastconn p50 / p90", "gap closed shed", "sheds/h/server", "over 16s × 16 servers"}},
		{scenarioShort, []string{"-conns", "40", "-lifetime", "4s", "-returning"},
			[]string{"scenario short-lived", "mean life 4s (-returning: a client that leaves comes back from its address", "pin+shed p50 / p90", "gap closed pin+shed", "\n1      pin  "}},
		{scenarioRestart, []string{"-conns", "40", "-restart-at", "9s", "-restart-within", "2s", "-window", "2s", "-ramp", "3s"},
			[]string{"scenario restart", "restart: at 9s every arm's HAProxy is stopped", "leastconn p50 / p90", "gap closed shed", "; HAProxies restarted at 9",
				"arrival: the first 40 clients connect at uniform moments within 3s (-ramp)", "\n1 before    ", "\n1 after     "}},
	} {
		t.Run(tc.scenario, func(t *testing.T) {
			dir, out := filepath.Join(tmp, tc.scenario), filepath.Join(tmp, tc.scenario+".txt")
			o, err := parseFlags(append([]string{"-weighter", bin, "-readme", "../../README.md", "-dir", dir, "-out", out,
				"-scenario", tc.scenario, "-seeds", "1", "-duration", "16s", "-warmup", "5s"}, tc.args...))
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			var stdout bytes.Buffer
			require.NoError(t, run(ctx, o, &stdout), "run:\n%s", stdout.String())
			text, err := os.ReadFile(out)
			require.NoError(t, err)
			for _, want := range tc.want {
				assert.Contains(t, string(text), want)
			}
			if tc.scenario == scenarioBurst { // the heavy clients' servers were read, after the burst and at the end
				assert.Regexp(t, `\n1 +oracle .* [0-3] / [0-3] `, string(text))
			}
			left, err := exec.Command("pgrep", "-a", "-f", dir).Output()
			assert.Error(t, err, "processes left behind:\n%s", left)
			t.Logf("%s", text)
		})
	}
}

// The shed arm runs the README's minimal config with its commented shed line on: the
// same backend, socket and source as the quick start's flags, plus shedding at the
// README's factors, and nothing else different.
func TestShedConfigFromREADME(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	qs, err := parseQuickStart(string(b), "run")
	require.NoError(t, err)
	text, err := shedConfig(string(b), qs, "/x/shed.sock", "http://127.0.0.1:1")
	require.NoError(t, err)
	cfg, err := config.Parse("shed.yaml", []byte(text), nil)
	require.NoError(t, err, "%s", text)
	require.Len(t, cfg.Backends, 1)
	p, ok := cfg.Backends[0].ShedPolicy()
	require.True(t, ok, "no shed in\n%s", text)
	want := weighter.DefaultShed()
	want.Above = 1.5
	assert.Equal(t, want, p, "docs/shedding.md's recommendation for the production world")
	assert.Equal(t, "/x/shed.sock", cfg.HAProxy.Socket)

	src := map[string]string{}
	for _, f := range []string{"prometheus-url", "query", "server-label"} {
		src[f], _ = flagValue(qs.Args, "--"+f)
	}
	src["prometheus-url"] = "http://127.0.0.1:1"
	backend, _ := flagValue(qs.Args, "--backend")
	flags, err := config.FromFlags(config.Flags{Socket: "/x/shed.sock", Backend: backend, Source: src})
	require.NoError(t, err)
	cfg.Backends[0].Shed = nil
	assert.Equal(t, flags.Backends[0], cfg.Backends[0], "the minimal config without its shed line is the quick start's flags")
	assert.Equal(t, flags.Interval, cfg.Interval)
}

func TestMostHeavyOnOneServer(t *testing.T) {
	reply := "0x1: proto=tcpv4 src=127.200.0.1:4000 fe=fe_ingest be=be_ingest srv=s3 ts=00\n" +
		"0x2: proto=tcpv4 src=127.200.0.2:4001 fe=fe_ingest be=be_ingest srv=s3 ts=00\n" +
		"0x3: proto=tcpv4 src=127.200.0.3:4002 fe=fe_ingest be=be_ingest srv=s1 ts=00\n" +
		"0x4: proto=tcpv4 src=127.1.0.3:4002 fe=fe_ingest be=be_ingest srv=s1 ts=00\n" +
		"0x5: proto=tcpv4 src=127.1.0.4:4002 fe=fe_ingest be=be_ingest srv=s1 ts=00\n" +
		"0x6: proto=unix_stream src=unix:1 fe=GLOBAL be=<NONE> srv=<none> ts=00\n"
	assert.Equal(t, 2, mostHeavyOnOneServer(reply))
	assert.Equal(t, 0, mostHeavyOnOneServer(""))
}

func TestParseWeighterMetrics(t *testing.T) {
	text := `# HELP haproxy_weighter_sessions_shed_total x
haproxy_weighter_sessions_shed_total{backend="be_ingest",server="s1"} 2
haproxy_weighter_sessions_shed_total{backend="be_ingest",server="s2"} 1
haproxy_weighter_fast_signal_reader{backend="be_ingest",reader="kernel"} 1
haproxy_weighter_fast_signal_reader{backend="be_ingest",reader="sessions"} 0
haproxy_weighter_ready 1
`
	f, err := parseWeighterMetrics(strings.NewReader(text))
	require.NoError(t, err)
	assert.Equal(t, weighterFigures{sheds: 3, reader: "kernel"}, f)
}

// Every client has its own loopback address, none a network's or broadcast's last octet.
func TestClientAddrs(t *testing.T) {
	seen := map[string]bool{}
	for n := range uint32(70000) {
		ip := clientAddr(n).To4()
		require.Equal(t, byte(127), ip[0])
		require.NotContains(t, []byte{0, 255}, ip[3], "%s", ip)
		require.False(t, seen[ip.String()], "%s twice", ip)
		require.NotEqual(t, heavyNet[1], ip[1])
		seen[ip.String()] = true
	}
	assert.Equal(t, "127.200.0.1", heavyAddr(0).String())
}

// The production scenario defaults to hour-long clients and 6 min; the lab is unchanged.
func TestScenarioFlags(t *testing.T) {
	o, err := parseFlags([]string{"-scenario", scenarioBurst})
	require.NoError(t, err)
	assert.Equal(t, time.Hour, o.Traffic.Lifetime)
	assert.Equal(t, 6*time.Minute, o.Duration)
	assert.Len(t, o.arms, 6)
	assert.Equal(t, 190*time.Second, o.heavyReadAt())
	o, err = parseFlags([]string{"-scenario", scenarioBurst, "-duration", "7m", "-lifetime", "2h"})
	require.NoError(t, err)
	assert.Equal(t, 2*time.Hour, o.Traffic.Lifetime)
	assert.Equal(t, 7*time.Minute, o.Duration)
	o, err = parseFlags(nil)
	require.NoError(t, err)
	assert.Equal(t, 20*time.Second, o.Traffic.Lifetime)
	assert.Equal(t, 5*time.Minute, o.Duration)
	assert.Equal(t, labArms, o.arms)
	_, err = parseFlags([]string{"-scenario", "nope"})
	assert.Error(t, err)

	// short-lived: the lab's lives and length with the production arms.
	o, err = parseFlags([]string{"-scenario", scenarioShort, "-returning"})
	require.NoError(t, err)
	assert.Equal(t, 20*time.Second, o.Traffic.Lifetime)
	assert.Equal(t, 5*time.Minute, o.Duration)
	assert.Equal(t, prodArms, o.arms)
	assert.Equal(t, 0, o.HeavyClients)
	assert.True(t, o.Returning)
	_, err = parseFlags([]string{"-returning"})
	assert.ErrorContains(t, err, "-scenario short-lived")
}

// With -returning a client that leaves comes back from its own address; without it a
// new client from a new address takes its place. Real sockets on loopback: the
// addresses a listener sees.
func TestReturningClientsKeepTheirAddress(t *testing.T) {
	for _, returning := range []bool{false, true} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		var mu sync.Mutex
		conns, addrs := 0, map[string]bool{}
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				mu.Lock()
				conns++
				addrs[c.RemoteAddr().(*net.TCPAddr).IP.String()] = true
				mu.Unlock()
				go func() { _, _ = io.Copy(io.Discard, c); c.Close() }()
			}
		}()
		o, err := parseFlags([]string{"-scenario", scenarioShort, "-conns", "3", "-lifetime", "100ms", "-ramp", "0", fmt.Sprintf("-returning=%t", returning)})
		require.NoError(t, err)
		place := func(float64) (string, func()) { return ln.Addr().String(), func() {} }
		traffic := newProdTraffic(o, 1, []string{ln.Addr().String()}, place)
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		traffic.run(ctx)
		cancel()
		ln.Close()
		mu.Lock()
		// Two connections (the arm and the placed one) per session.
		assert.Greater(t, conns, 2*3*3, "returning=%t: sessions ended and began again", returning)
		if returning {
			assert.Len(t, addrs, 3, "returning: each client back from its address")
		} else {
			assert.Greater(t, len(addrs), 3*3, "not returning: each new client from a new address")
		}
		mu.Unlock()
	}
}

// many: as many clients as the open-file limit allows at 8 descriptors a client in this
// process, 16 servers, no heavy clients, rates scaled to the lab's total.
func TestManyFlags(t *testing.T) {
	n, why := manyConns(20000, 4)
	assert.Equal(t, 2450, n)
	assert.Contains(t, why, "÷ 8 descriptors")
	n, _ = manyConns(100, 4)
	assert.Equal(t, 1, n)
	o, err := parseFlags([]string{"-scenario", scenarioMany})
	require.NoError(t, err)
	soft, _, err := raiseNoFile()
	require.NoError(t, err)
	want, _ := manyConns(soft, len(prodArms))
	assert.Equal(t, want, o.Traffic.Conns)
	assert.Equal(t, 16, o.Servers)
	assert.Equal(t, 0, o.HeavyClients)
	assert.Equal(t, time.Hour, o.Traffic.Lifetime)
	assert.Equal(t, 6*time.Minute, o.Duration)
	assert.InDelta(t, 2000*240/float64(want), o.Traffic.Median, 1e-6)
	assert.GreaterOrEqual(t, haproxyMaxconn(o.Traffic.Conns), 2*o.Traffic.Conns)
	_, err = parseFlags([]string{"-scenario", scenarioMany, "-conns", "1000000"})
	assert.Error(t, err)

	o, err = parseFlags([]string{"-scenario", scenarioRestart})
	require.NoError(t, err)
	assert.Equal(t, 240, o.Traffic.Conns)
	assert.Equal(t, 0, o.HeavyClients)
	assert.Equal(t, 180*time.Second, o.RestartAt)
	assert.Equal(t, 5*time.Second, o.RestartWithin)
}

func TestShedsLogged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.log")
	log := `time=2026-12-02T07:23:00.000Z level=INFO msg="weights written" backend=be_ingest
time=2026-12-02T07:23:02.473Z level=INFO msg="session shed" backend=be_ingest server=s8 session=0x7fdca40527f0 client=127.200.0.2:52233 rate_bytes_per_second=300000 age=13s load_ratio=1.55 reason="shed session"
`
	require.NoError(t, os.WriteFile(path, []byte(log), 0o644))
	start := time.Date(2026, 12, 2, 7, 22, 0, 0, time.UTC)
	assert.Equal(t, []string{"62s s8 127.200.0.2 6000/s"}, shedsLogged(path, start))
	assert.Empty(t, shedsLogged(filepath.Join(t.TempDir(), "none"), start))
}

// TestWriteWindows: one row per window, arm and server, with the server's load over the
// window and its open connections at the window's end; a partial window is left out.
func TestWriteWindows(t *testing.T) {
	var snaps []snapshot
	for s := range 26 {
		n := int64(s)
		snaps = append(snaps, snapshot{T: time.Duration(s) * time.Second,
			Lines: [][]int64{{3 * n, n}, {2 * n, 2 * n}},
			Open:  [][]int{{s, 1}, {2, 2}}})
	}
	var b strings.Builder
	if err := writeWindows(&b, []string{"leastconn", "default"}, snaps, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	want := "end_s\tarm\tserver\tload\topen\n" +
		"10\tleastconn\ts1\t3.0\t10\n10\tleastconn\ts2\t1.0\t1\n10\tdefault\ts1\t2.0\t2\n10\tdefault\ts2\t2.0\t2\n" +
		"20\tleastconn\ts1\t3.0\t20\n20\tleastconn\ts2\t1.0\t1\n20\tdefault\ts1\t2.0\t2\n20\tdefault\ts2\t2.0\t2\n"
	if b.String() != want {
		t.Errorf("windows:\n%s\nwant:\n%s", b.String(), want)
	}
}

// A pinning arm's note says whether its weighter pinned, what it wrote and when, from
// its log's "pinning heavy clients" and "pins written" lines.
func TestPinsLogged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.log")
	log := `time=2026-12-02T07:22:03.000Z level=INFO msg="pinning heavy clients" backend=be_ingest table=be_ingest pins=0
time=2026-12-02T07:22:03.100Z level=INFO msg="pins written" backend=be_ingest set=6 cleared=0 pinned=6
time=2026-12-02T07:25:01.900Z level=INFO msg="pins written" backend=be_ingest set=3 cleared=1 pinned=8
`
	require.NoError(t, os.WriteFile(path, []byte(log), 0o644))
	start := time.Date(2026, 12, 2, 7, 22, 0, 0, time.UTC)
	assert.Equal(t, "pinning heavy clients; 9 pins set, 1 cleared, 8 in force at the end (writes: 3s +6-0, 182s +3-1)", pinsLogged(path, start))
	none := filepath.Join(t.TempDir(), "none.log")
	require.NoError(t, os.WriteFile(none, []byte(`time=2026-12-02T07:22:03.000Z level=INFO msg="clients not pinned" backend=be_ingest reason="no stick table"`+"\n"), 0o644))
	assert.Equal(t, "clients not pinned (no stick table); 0 pins set, 0 cleared, 0 in force at the end", pinsLogged(none, start))
}

// The pin arms' HAProxy backends have the table's two lines; the others do not.
func TestPinArmsConfig(t *testing.T) {
	var pins []string
	for _, a := range prodArms {
		if a.Pin {
			pins = append(pins, a.Name)
		}
	}
	assert.Equal(t, []string{"pin", "pin+shed"}, pins)
	for _, pin := range []bool{false, true} {
		var b strings.Builder
		require.NoError(t, haproxyCfg.Execute(&b, haproxyConf{Socket: "/s", Backend: "be_ingest", Pin: pin, Servers: []haproxyServer{{"s1", "127.0.0.1:1"}}}))
		assert.Equal(t, pin, strings.Contains(b.String(), "\n    stick-table type ip size 100k expire 2h\n    stick match src\n"), b.String())
	}
}

// A pinning arm's note counts its pins against where their clients' connections are.
func TestComparePins(t *testing.T) {
	table := "# table: be_ingest, type: ip, size:102400, used:3\n" +
		"0x1: key=127.1.0.2 use=0 exp=7100794 server_id=2 server_key=-\n" +
		"0x2: key=127.1.0.3 use=0 exp=7110989 server_id=1 server_key=-\n" +
		"0x3: key=127.1.0.9 use=0 exp=7110989 server_id=2 server_key=-\n"
	sess := "0x7f: proto=tcpv4 src=127.1.0.2:4000 fe=fe_ingest be=be_ingest srv=s2 ts=00 epoch=0 age=1m calls=2 rate=0\n" +
		"0x7e: proto=tcpv4 src=127.1.0.3:4001 fe=fe_ingest be=be_ingest srv=s2 ts=00 epoch=0 age=1m calls=2 rate=0\n"
	state := "1\n# be_id be_name srv_id srv_name srv_addr\n3 be_ingest 1 s1 127.0.0.1\n3 be_ingest 2 s2 127.0.0.1\n"
	assert.Equal(t, "3 pins: 1 clients on their pin's server, 1 connected elsewhere, 1 not connected; pins per server s1=1 s2=2",
		comparePins(table, sess, state))
}
