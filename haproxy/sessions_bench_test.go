package haproxy

import (
	"context"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
)

// BenchmarkStreamDumpVsStat measures what one read costs with 1,000 to
// 10,000 idle streams open through a real HAProxy, all on one backend of four
// servers: `show sess all` (the live per-stream totals), `show sess` (one line
// per stream, no totals) and `show stat` for that backend (the counters), raw
// (bytes read and dropped) and through the package's readers (parsed). It
// reports the reply size, the wall time per read and the CPU time HAProxy
// spent per read. Benchmark only:
//
//	go test ./haproxy -run '^$' -bench BenchmarkStreamDumpVsStat -benchtime 2s
//
// "connected" streams have their server connection open (two descriptors in
// HAProxy and two in this process per stream); "held" streams wait in the
// backend's tcp-request content rules and have no server side (one
// descriptor each). HAProxy refuses to start unless its descriptor limit
// covers two per maxconn, so under a hard RLIMIT_NOFILE of 20,000 (what the
// machine this was written on allows, root or not) one process holds at most
// ~9,985 connections: 9,900 held streams stand for 10,000.
func BenchmarkStreamDumpVsStat(b *testing.B) {
	for _, tc := range []struct {
		n         int
		connected bool
	}{{1000, true}, {1000, false}, {5000, true}, {9900, false}} {
		kind := map[bool]string{true: "connected", false: "held"}[tc.connected]
		b.Run(fmt.Sprintf("streams=%d/%s", tc.n, kind), func(b *testing.B) {
			n := tc.n
			h, echoFront := startStreamLoad(b, n, tc.connected)
			c := newClient(b, h.Socket)
			be := c.Backend("be")
			keepBE := func(s *Session) bool { return s.Backend == "be" }
			listed, err := be.Sessions(context.Background())
			if err != nil || len(listed) != n {
				b.Fatalf("Sessions: %d streams, %v", len(listed), err)
			}
			oneID := listed[n/2].ID
			for _, read := range []struct {
				name string
				read func(ctx context.Context) (bytes int64, err error)
			}{
				{"idle", func(ctx context.Context) (int64, error) {
					time.Sleep(20 * time.Millisecond) // the probe's baseline: no read at all
					return 0, nil
				}},
				{"show-sess-all/raw", func(ctx context.Context) (int64, error) { return rawRead(ctx, h.Socket, "show sess all") }},
				{"show-sess-all/Backend.Sessions", func(ctx context.Context) (int64, error) {
					d, err := c.dumpSessions(ctx, "show sess all", keepBE)
					if err == nil && len(d.sessions) != n {
						err = fmt.Errorf("%d streams listed, want %d", len(d.sessions), n)
					}
					return d.bytes, err
				}},
				{"show-sess-one-id/raw", func(ctx context.Context) (int64, error) {
					// What ShutdownSession's check costs: HAProxy walks
					// its streams to find the one, and prints only it.
					return rawRead(ctx, h.Socket, "show sess "+oneID)
				}},
				{"show-sess/raw", func(ctx context.Context) (int64, error) { return rawRead(ctx, h.Socket, "show sess") }},
				{"show-stat/raw", func(ctx context.Context) (int64, error) { return rawRead(ctx, h.Socket, statCmd("be")) }},
				{"show-stat/Client.Stats", func(ctx context.Context) (int64, error) {
					_, err := c.Stats(ctx, be.Name())
					return 0, err // the size is the raw read's
				}},
			} {
				b.Run(read.name, func(b *testing.B) {
					b.ReportAllocs()
					ctx := context.Background()
					var total int64
					probe := startEchoProbe(b, echoFront)
					cpu0 := cpuTicks(b, h.PID())
					for b.Loop() {
						got, err := read.read(ctx)
						if err != nil {
							b.Fatal(err)
						}
						total += got
					}
					cpu1 := cpuTicks(b, h.PID())
					p99, worst := probe.finish()
					b.ReportMetric(p99, "echo-p99-ms")
					b.ReportMetric(worst, "echo-max-ms")
					ops := float64(b.N)
					b.ReportMetric(float64(total)/ops, "reply-bytes/op")
					b.ReportMetric(float64(b.Elapsed().Microseconds())/ops/1000, "ms/op")
					b.ReportMetric(float64(cpu1-cpu0)*10/ops, "haproxy-cpu-ms/op")
				})
			}
		})
	}
}

// rawRead sends cmd in one-command mode and reads the reply to the end,
// counting and dropping it: HAProxy's cost and the transfer, no parsing.
func rawRead(ctx context.Context, socket, cmd string) (int64, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(time.Minute)); err != nil {
		return 0, err
	}
	if _, err := io.WriteString(conn, cmd+"\n"); err != nil {
		return 0, err
	}
	return io.Copy(io.Discard, conn)
}

// startStreamLoad starts HAProxy with a leastconn backend "be" of four
// loopback servers that accept and hold connections, opens n client
// connections through it, and waits until the dump lists n streams on the
// backend (with a server each, if connected). Unless connected, the backend
// holds each stream in its tcp-request content rules for ten minutes, so no
// server connection is made. Everything is closed and stopped when the
// benchmark ends.
func startStreamLoad(b *testing.B, n int, connected bool) (*testenv.HAProxy, int) {
	b.Helper()
	need := uint64(n + 1024)
	if connected {
		need += uint64(n) // the servers' side of each connection
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		b.Fatalf("getrlimit: %v", err)
	}
	if lim.Cur < need {
		raised := syscall.Rlimit{Cur: need, Max: max(lim.Max, need)}
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised); err != nil {
			b.Skipf("%d streams need %d file descriptors, have %d (hard %d): %v", n, need, lim.Cur, lim.Max, err)
		}
	}
	hold := "  tcp-request inspect-delay 10m\n  tcp-request content accept if WAIT_END\n"
	if connected {
		hold = ""
	}
	// HAProxy wants two descriptors per maxconn plus a few, and exits if its
	// limit cannot be raised that far: keep maxconn just above n.
	maxconn := n + 80
	front, echoFront := testenv.FreePort(b), testenv.FreePort(b)
	// A second global section adds to testenv's. Long idle timeouts: the
	// connections must outlive the benchmark, which sends nothing on them.
	h := testenv.StartHAProxy(b, fmt.Sprintf(`
global
  maxconn %d
defaults
  mode tcp
  maxconn %d
  timeout connect 5s
  timeout client 10m
  timeout server 10m
frontend fe
  bind 127.0.0.1:%d
  default_backend be
frontend fe_echo
  bind 127.0.0.1:%d
  default_backend be_echo
backend be_echo
  server e1 %s
backend be
  balance leastconn
%s  server s1 %s
  server s2 %s
  server s3 %s
  server s4 %s
`, maxconn, maxconn, front, echoFront, startEchoServer(b), hold, testenv.StartDiscardServer(b), testenv.StartDiscardServer(b),
		testenv.StartDiscardServer(b), testenv.StartDiscardServer(b)))

	conns := make([]net.Conn, n)
	b.Cleanup(func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	})
	addr := fmt.Sprintf("127.0.0.1:%d", front)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	next := make(chan int, n)
	for i := range n {
		next <- i
	}
	close(next)
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				c, err := net.DialTimeout("tcp", addr, 10*time.Second)
				if err != nil {
					errs <- err
					return
				}
				conns[i] = c
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatalf("open %d connections: %v", n, err)
	}

	c := newClient(b, h.Socket)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		d, err := c.dumpSessions(context.Background(), "show sess all",
			func(s *Session) bool { return s.Backend == "be" && (s.Server != "") == connected })
		if err != nil {
			b.Fatal(err)
		}
		if len(d.sessions) == n {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("HAProxy lists %d streams on be, want %d\n%s", len(d.sessions), n, h.Log())
		}
		time.Sleep(100 * time.Millisecond) // polling interval, not a wait for an outcome
	}
	return h, echoFront
}

// echoProbe sends one byte at a time through HAProxy to an echo server, 500
// times a second, and keeps the round trip times: a read that stops HAProxy's
// other work shows as a long round trip.
type echoProbe struct {
	mu   sync.Mutex
	rtts []time.Duration
	stop chan struct{}
	done chan struct{}
}

func startEchoProbe(b *testing.B, port int) *echoProbe {
	conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 5*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	p := &echoProbe{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		defer conn.Close()
		buf := []byte{1}
		for {
			select {
			case <-p.stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			start := time.Now()
			_ = conn.SetDeadline(start.Add(10 * time.Second))
			if _, err := conn.Write(buf); err != nil {
				return
			}
			if _, err := io.ReadFull(conn, buf); err != nil {
				return
			}
			p.mu.Lock()
			p.rtts = append(p.rtts, time.Since(start))
			p.mu.Unlock()
		}
	}()
	return p
}

// finish stops the probe and returns the 99th percentile and the largest
// round trip, in milliseconds.
func (p *echoProbe) finish() (p99, worst float64) {
	close(p.stop)
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.rtts) == 0 {
		return 0, 0
	}
	slices.Sort(p.rtts)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return ms(p.rtts[len(p.rtts)*99/100]), ms(p.rtts[len(p.rtts)-1])
}
