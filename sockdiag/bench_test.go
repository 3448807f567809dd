package sockdiag

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkRead measures one read of the socket table: the daemon's CPU
// (cpu-ns/op: user+system time of this process, the kernel's dump work
// included) and allocations, at 1,000, 5,000 and 10,000 open connections to
// 10 servers, with 10,000 other connections open on the host that are not to
// a server (a balancer's client side is as many again). Every socket is real,
// on loopback; this process holds the client end of each server connection
// and plays HAProxy (its pid is the Reader's); the far ends and the other
// connections are in helper processes.
//
// Variants: the kernel filter by server address (filtered) or every TCP
// socket dumped and matched here (unfiltered); HAProxy's sockets told by uid
// or by inode, the latter either steady (long-lived connections: HAProxy's
// descriptors listed once) or rescanned at every read (new connections at
// every read: a listing each time, the worst case).
//
//	go test -run '^$' -bench BenchmarkRead -benchtime 50x ./sockdiag/
func BenchmarkRead(b *testing.B) {
	const unrelated, nServers = 10_000, 10
	servers := map[string]netip.AddrPort{}
	lns := startHelper(b, fmt.Sprintf("listen %d", nServers))
	for i, a := range lns {
		servers[fmt.Sprintf("s%d", i)] = netip.MustParseAddrPort(a)
	}
	other := startHelper(b, "listen 1")
	startHelper(b, fmt.Sprintf("dial %s %d", other[0], unrelated))
	pid := func(context.Context) ([]int, error) { return []int{os.Getpid()}, nil }
	open := 0
	for _, n := range []int{1000, 5000, 10_000} {
		openConns(b, lns, n-open)
		open = n
		for _, v := range []struct {
			name     string
			cfg      Config
			rescan   bool
			wantHow  Ownership
			filtered bool
		}{
			{name: "filtered/uid", cfg: Config{PIDs: pid, Ownership: OwnerUID}, wantHow: OwnerUID},
			{name: "filtered/inode", cfg: Config{PIDs: pid}, wantHow: OwnerInode},
			{name: "filtered/inode-rescan", cfg: Config{PIDs: pid}, rescan: true, wantHow: OwnerInode},
			{name: "unfiltered/uid", cfg: Config{PIDs: pid, Ownership: OwnerUID, Unfiltered: true}, wantHow: OwnerUID},
		} {
			b.Run(fmt.Sprintf("sockets=%d/%s", n, v.name), func(b *testing.B) {
				r := New(v.cfg)
				first, err := r.Read(context.Background(), servers)
				if err != nil {
					b.Fatal(err)
				}
				if got := countOpen(first); got != n || first.Owner != v.wantHow {
					b.Fatalf("read %d connections by %s, want %d by %s", got, first.Owner, n, v.wantHow)
				}
				var before, after unix.Rusage
				_ = unix.Getrusage(unix.RUSAGE_SELF, &before)
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					if v.rescan {
						r.ino = newInodeSet()
					}
					if _, err := r.Read(context.Background(), servers); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				_ = unix.Getrusage(unix.RUSAGE_SELF, &after)
				cpu := time.Duration(after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano())
				b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
				b.ReportMetric(float64(first.Dumped), "dumped")
			})
		}
	}
}

func countOpen(r TableReading) int {
	n := 0
	for _, s := range r.Servers {
		n += s.Open
	}
	return n
}

// The far ends of the benchmark's connections live in helper processes (this
// test binary run again, TestMain's helper mode): a process may hold only so
// many descriptors (RLIMIT_NOFILE, 20,000 on the build machine, whose hard
// limit an unprivileged container cannot raise), and 10,000 connections with
// both ends here, plus 10,000 unrelated ones, are 40,000. This process holds
// only HAProxy's side: the client end of each server connection.

const helperEnv = "SOCKDIAG_BENCH_HELPER"

// TestMain runs the helper when asked, the tests otherwise.
func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		runHelper(mode)
		return
	}
	os.Exit(m.Run())
}

// runHelper is a helper process: "listen N" listens on N loopback ports,
// prints them, and holds every connection it accepts; "dial ADDR N" opens N
// connections to ADDR and holds them; "dialfrom ADDR N M" too, from M
// loopback source addresses in turn (clientAddr), each writing 5 bytes. Either prints "ready" when done and
// lives until its stdin closes.
func runHelper(mode string) {
	var kind string
	var n, sources int
	var addr string
	if _, err := fmt.Sscanf(mode, "dialfrom %s %d %d", &addr, &n, &sources); err == nil {
		kind = "dialfrom"
	} else if _, err := fmt.Sscanf(mode, "listen %d", &n); err == nil {
		kind = "listen"
	} else if _, err := fmt.Sscanf(mode, "dial %s %d", &addr, &n); err == nil {
		kind = "dial"
	} else {
		fmt.Fprintln(os.Stderr, "bad helper mode", mode)
		os.Exit(2)
	}
	var mu sync.Mutex
	var held []net.Conn // held so that no connection is closed by its finalizer
	switch kind {
	case "listen":
		for range n {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			fmt.Println(ln.Addr())
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					mu.Lock()
					held = append(held, c)
					mu.Unlock()
				}
			}()
		}
	case "dialfrom":
		for i := range n {
			src := clientAddr(i % sources)
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: src.AsSlice()}}
			c, err := d.Dial("tcp", addr)
			if err == nil {
				_, err = c.Write([]byte("hello"))
			}
			if err != nil {
				fmt.Fprintf(os.Stderr, "connection %d from %s: %v\n", i, src, err)
				os.Exit(1)
			}
			held = append(held, c)
		}
	case "dial":
		for i := range n {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				fmt.Fprintf(os.Stderr, "connection %d: %v\n", i, err)
				os.Exit(1)
			}
			held = append(held, c)
		}
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
	mu.Lock()
	defer mu.Unlock()
	for _, c := range held {
		c.Close()
	}
}

// startHelper starts a helper process in mode and returns the lines it
// printed before "ready".
func startHelper(b *testing.B, mode string) []string {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), helperEnv+"="+mode)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { stdin.Close(); _ = cmd.Wait() })
	var lines []string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if sc.Text() == "ready" {
			return lines
		}
		lines = append(lines, sc.Text())
	}
	b.Fatalf("helper %q ended before it was ready", mode)
	return nil
}

// openConns opens n connections spread over addrs, each with a few bytes
// sent, held until the benchmark ends.
func openConns(b *testing.B, addrs []string, n int) {
	for i := range n {
		c, err := net.Dial("tcp", addrs[i%len(addrs)])
		if err != nil {
			b.Fatalf("connection %d of %d: %v", i, n, err)
		}
		if _, err := c.Write([]byte("hello")); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Close() })
	}
}

// clientAddr is the i-th loopback source address of the clients benchmark:
// 127.1.0.1 onwards.
func clientAddr(i int) netip.Addr {
	return netip.AddrFrom4([4]byte{127, 1, byte(i / 250), byte(i%250 + 1)})
}

// BenchmarkReadClients measures a read of HAProxy's client side: 10,000
// client connections from 2,000 addresses (5 each) accepted on one
// listener, with the server side's dump (one server, no connection) as in
// every read: the daemon's CPU (cpu-ns/op) and allocations per read. This
// process listens and holds the accepted sockets (it plays HAProxy: its pid
// is the Reader's); the clients are a helper process. HAProxy's sockets
// told by uid, by inode with the descriptors listed once (long-lived
// clients), or listed at every read (new connections at every read: the
// worst case); and the same read without listeners, for the difference.
//
//	go test -run '^$' -bench BenchmarkReadClients -benchtime 50x ./sockdiag/
func BenchmarkReadClients(b *testing.B) {
	const conns, sources = 10_000, 2_000
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	accepted := make(chan net.Conn, conns)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	startHelper(b, fmt.Sprintf("dialfrom %s %d %d", ln.Addr(), conns, sources))
	for range conns {
		c := <-accepted
		b.Cleanup(func() { c.Close() })
	}
	listener := netip.MustParseAddrPort(ln.Addr().String())
	servers := map[string]netip.AddrPort{"s1": netip.MustParseAddrPort("127.0.0.1:1")}
	pid := func(context.Context) ([]int, error) { return []int{os.Getpid()}, nil }
	for _, v := range []struct {
		name      string
		cfg       Config
		rescan    bool
		listeners bool
	}{
		{name: "uid", cfg: Config{PIDs: pid, Ownership: OwnerUID}, listeners: true},
		{name: "inode", cfg: Config{PIDs: pid}, listeners: true},
		{name: "inode-rescan", cfg: Config{PIDs: pid}, rescan: true, listeners: true},
		{name: "wildcard-listener/uid", cfg: Config{PIDs: pid, Ownership: OwnerUID}, listeners: true},
		{name: "no-listeners/uid", cfg: Config{PIDs: pid, Ownership: OwnerUID}},
	} {
		b.Run(v.name, func(b *testing.B) {
			if v.listeners {
				v.cfg.Listeners = []netip.AddrPort{listener}
				if strings.HasPrefix(v.name, "wildcard") {
					v.cfg.Listeners = []netip.AddrPort{netip.AddrPortFrom(netip.IPv4Unspecified(), listener.Port())}
				}
			}
			r := New(v.cfg)
			first, err := r.Read(context.Background(), servers)
			if err != nil {
				b.Fatal(err)
			}
			// A wildcard listener matches any socket on its port: another
			// process's on another loopback address too.
			if v.listeners && (first.Clients.Open < conns || len(first.Clients.Clients) < sources) {
				b.Fatalf("read %d connections from %d addresses, want %d from %d", first.Clients.Open, len(first.Clients.Clients), conns, sources)
			}
			var before, after unix.Rusage
			_ = unix.Getrusage(unix.RUSAGE_SELF, &before)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if v.rescan {
					r.ino = newInodeSet()
				}
				got, err := r.Read(context.Background(), servers)
				if err != nil {
					b.Fatal(err)
				}
				if v.listeners && got.Clients.Open < conns {
					b.Fatalf("read %d client connections", got.Clients.Open)
				}
			}
			b.StopTimer()
			_ = unix.Getrusage(unix.RUSAGE_SELF, &after)
			cpu := time.Duration(after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano())
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(first.Dumped), "dumped")
		})
	}
}
