package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
)

// flatPromData is an hour of counter samples every 5 s around now, every
// server's counter growing at the same rate: the external metric says the
// servers are equally loaded, before and after the change the test makes.
func flatPromData(now time.Time) string {
	d := testenv.PromHour(now, 5*time.Second).Type("datapoints_received", "counter")
	for _, s := range servers {
		d.Rate("datapoints_received_total", fmt.Sprintf("server=%q", s), 40)
	}
	return d.String()
}

// streamServer is a backend server that sends each connection `rate` bytes
// a second (changeable while it runs) and discards what it receives: its
// load per connection is what the test sets.
type streamServer struct {
	ln   net.Listener
	rate atomic.Int64 // bytes/s per connection
}

func startStreamServer(t *testing.T, rate int64) *streamServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &streamServer{ln: ln}
	s.rate.Store(rate)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(io.Discard, c) }()
			go s.send(c)
		}
	}()
	return s
}

// send writes a tenth of the rate every 100 ms until the connection fails.
func (s *streamServer) send(c net.Conn) {
	defer c.Close()
	buf := make([]byte, 64<<10)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for range tick.C {
		for n := s.rate.Load() / 10; n > 0; {
			k := min(n, int64(len(buf)))
			if _, err := c.Write(buf[:k]); err != nil {
				return
			}
			n -= k
		}
	}
}

// openClients opens n connections through the frontend and reads them until
// the test ends.
func openClients(t *testing.T, addr string, n int) {
	t.Helper()
	var conns []net.Conn
	var mu sync.Mutex
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	for range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		// A byte each way so that HAProxy picks a server now (leastconn
		// spreads the connections as they come).
		if _, err := c.Write([]byte{0}); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
		go func() { _, _ = io.Copy(io.Discard, c) }()
		time.Sleep(20 * time.Millisecond) // one at a time, so leastconn spreads them evenly
	}
}

// TestQuickStartRunsTheFreshPipeline: the README's quick-start command line,
// unchanged (plus --listen for a free port), weighs by HAProxy's fast signal:
// when the connections of one server start carrying ten times the bytes,
// its weight drops within a few 2 s cycles, while Prometheus (rate over 1m)
// still shows every server equally loaded.
func TestQuickStartRunsTheFreshPipeline(t *testing.T) {
	front := testenv.FreePort(t)
	var srv []*streamServer
	var cfg strings.Builder
	cfg.WriteString(testenv.HAProxyDefaults)
	fmt.Fprintf(&cfg, "frontend fe\n  bind 127.0.0.1:%d\n  default_backend be_ingest\n", front)
	cfg.WriteString("backend be_ingest\n  balance leastconn\n")
	for _, s := range servers {
		ss := startStreamServer(t, 20_000)
		srv = append(srv, ss)
		fmt.Fprintf(&cfg, "  server %s %s weight 100\n", s, ss.ln.Addr())
	}
	h := testenv.StartHAProxy(t, cfg.String())
	prom := testenv.StartPrometheus(t, flatPromData(time.Now()))
	openClients(t, fmt.Sprintf("127.0.0.1:%d", front), 8)

	// once: the dry run waits an interval for two reads and shows the inputs.
	r := runCmd(t, "once", "--socket", h.Socket, "--backend", "be_ingest", "--prometheus-url", prom.URL,
		"--query", "rate(datapoints_received_total[1m])", "--server-label", "server", "-o", "json")
	if r.code != 0 {
		t.Fatalf("once: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	var cycles []struct {
		Signal struct {
			Pipeline string
			Fast     string
			Servers  map[string]struct{ Local, Sessions, Factor float64 }
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &cycles); err != nil || len(cycles) != 1 {
		t.Fatalf("once -o json: %v\n%s", err, r.stdout)
	}
	sig := cycles[0].Signal
	if sig.Pipeline != "fast×calibration" || sig.Fast != "live" || len(sig.Servers) != 4 {
		t.Fatalf("once signal %+v\n%s", sig, r.stdout)
	}
	for name, in := range sig.Servers {
		if in.Local <= 0 || in.Sessions < 1 || in.Factor != 1 {
			t.Errorf("%s: fast inputs %+v (want bytes moving, sessions open, no calibration yet)", name, in)
		}
	}

	listen := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	d := startDaemon(t, listen, "--socket", h.Socket, "--backend", "be_ingest", "--prometheus-url", prom.URL,
		"--query", "rate(datapoints_received_total[1m])", "--server-label", "server", "--listen", listen)
	testenv.WaitWithin(t, 10*time.Second, "the start line naming the fast signal", func() bool {
		return strings.Contains(d.logs.String(), `"msg":"weighting by the calibrated fast signal"`)
	})
	if logs := d.logs.String(); !strings.Contains(logs, `"window":"1m0s (the query's range [1m])"`) {
		t.Errorf("the start line does not give the window from the query:\n%s", logs)
	}
	live := `haproxy_weighter_fast_signal_state{backend="be_ingest",state="live"}`
	testenv.WaitWithin(t, 10*time.Second, "fast signal live", func() bool { return d.metric(live) == 1 })

	// Equal per-connection loads: every server near the top weight.
	testenv.WaitWithin(t, 15*time.Second, "even weights", func() bool {
		w := testenv.Weights(t, h.Socket, "be_ingest")
		for _, s := range servers {
			if w[s] < 200 {
				return false
			}
		}
		return true
	})

	// s3's connections now carry ten times the bytes. Prometheus does not
	// show it (its data is flat); the fast signal does, the next cycle.
	changed := time.Now()
	srv[2].rate.Store(200_000)
	testenv.WaitWithin(t, 12*time.Second, "s3's weight down to a quarter of the others'", func() bool {
		w := testenv.Weights(t, h.Socket, "be_ingest")
		return w["s3"]*4 <= min(w["s1"], w["s2"], w["s4"])
	})
	t.Logf("s3's weight fell to a quarter of the others' %s after its load changed; weights %v",
		time.Since(changed).Round(100*time.Millisecond), testenv.Weights(t, h.Socket, "be_ingest"))
	if f := d.metric(`haproxy_weighter_server_calibration_factor{backend="be_ingest",server="s3"}`); f != 1 {
		t.Errorf("calibration factor of s3 = %v, want 1 (no point aligned with a minute of local history yet)", f)
	}
	if code := d.stop(); code != 0 {
		t.Errorf("exit code %d after SIGTERM", code)
	}
}
