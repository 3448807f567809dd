package haproxy

import (
	"context"
	"fmt"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
)

// BenchmarkServerStreams is what finding a hot server's streams by their
// server connection costs (kernel-path shedding, streamfind.go) against the
// whole dump, at 3,000 connected streams spread over four servers by
// leastconn (~750 each): on 2.6 only the whole dump exists; from 3.2 the
// server filter.
//
//	go test ./haproxy -run '^$' -bench BenchmarkServerStreams -benchtime 20x
func BenchmarkServerStreams(b *testing.B) {
	const n = 3000
	for _, version := range []string{"2.6", "3.2"} {
		b.Run("haproxy="+version, func(b *testing.B) {
			h := startVersionLoad(b, version, n)
			c := newClient(b, h.Socket)
			be := c.Backend("be")
			reads := []struct {
				name string
				read func(ctx context.Context) (int64, error)
			}{
				{"show-sess-all/raw", func(ctx context.Context) (int64, error) { return rawRead(ctx, h.Socket, "show sess all") }},
				{"ServerStreams(s1)", func(ctx context.Context) (int64, error) {
					got, err := be.ServerStreams(ctx, "s1")
					if err == nil && len(got.Streams) < n/8 {
						err = fmt.Errorf("%d streams of s1", len(got.Streams))
					}
					return got.Bytes, err
				}},
			}
			if version >= "3.2" {
				reads = append(reads, struct {
					name string
					read func(ctx context.Context) (int64, error)
				}{"show-sess-all-server/raw", func(ctx context.Context) (int64, error) {
					return rawRead(ctx, h.Socket, "show sess all server be/s1")
				}})
			}
			for _, read := range reads {
				b.Run(read.name, func(b *testing.B) {
					b.ReportAllocs()
					ctx := context.Background()
					var total int64
					cpu0 := cpuTicks(b, h.PID())
					for b.Loop() {
						got, err := read.read(ctx)
						if err != nil {
							b.Fatal(err)
						}
						total += got
					}
					cpu1 := cpuTicks(b, h.PID())
					ops := float64(b.N)
					b.ReportMetric(float64(total)/ops, "reply-bytes/op")
					b.ReportMetric(float64(b.Elapsed().Microseconds())/ops/1000, "ms/op")
					b.ReportMetric(float64(cpu1-cpu0)*10/ops, "haproxy-cpu-ms/op")
				})
			}
		})
	}
}

// startVersionLoad starts HAProxy version with backend be of four sink
// servers and n client connections through it, each with its server
// connection (a first byte makes HAProxy connect).
func startVersionLoad(b *testing.B, version string, n int) *testenv.HAProxy {
	b.Helper()
	need := uint64(2*n + 1024)
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		b.Fatalf("getrlimit: %v", err)
	}
	if lim.Cur < need {
		raised := syscall.Rlimit{Cur: need, Max: max(lim.Max, need)}
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised); err != nil {
			b.Fatalf("%d streams need %d file descriptors, have %d (hard %d): %v", n, need, lim.Cur, lim.Max, err)
		}
	}
	maxconn := n + 80
	front := testenv.FreePort(b)
	h := testenv.StartHAProxyVersion(b, version, fmt.Sprintf(`
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
backend be
  balance leastconn
  server s1 %s
  server s2 %s
  server s3 %s
  server s4 %s
`, maxconn, maxconn, front, testenv.StartDiscardServer(b), testenv.StartDiscardServer(b),
		testenv.StartDiscardServer(b), testenv.StartDiscardServer(b)))
	conns := make([]net.Conn, n)
	b.Cleanup(func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	})
	var wg sync.WaitGroup
	next := make(chan int, n)
	for i := range n {
		next <- i
	}
	close(next)
	for range 16 {
		wg.Go(func() {
			for i := range next {
				c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", front), 5*time.Second)
				if err != nil {
					continue
				}
				_, _ = c.Write([]byte{0})
				conns[i] = c
			}
		})
	}
	wg.Wait()
	c := newClient(b, h.Socket)
	testenv.WaitWithin(b, time.Minute, "every connection at a server", func() bool {
		stats, err := c.Stats(context.Background(), "be")
		if err != nil {
			return false
		}
		var cur uint64
		for _, s := range stats {
			cur += s.CurrentSessions
		}
		return cur == uint64(n)
	})
	return h
}
