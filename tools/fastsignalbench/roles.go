package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The child processes: this binary run again with roleEnv set. Each speaks a line protocol on
// stdin/stdout with the parent and exits when its stdin closes (the parent ended).

const roleEnv = "FASTSIGNALBENCH_ROLE"

func runRole(role string, args []string) int {
	var err error
	switch role {
	case "servers":
		err = runServers(args)
	case "clients":
		err = runClients(args)
	default:
		err = fmt.Errorf("unknown role %q", role)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "fastsignalbench %s: %v\n", role, err)
		return 1
	}
	return 0
}

// runServers listens on -sinks loopback ports that read and drop what they receive (the
// backend's servers) and one that echoes (the probe's), prints their addresses on one line
// (the echo server's last), and serves until stdin closes.
func runServers(args []string) error {
	fs := flag.NewFlagSet("servers", flag.ContinueOnError)
	sinks := fs.Int("sinks", 8, "sink servers")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var addrs []string
	for i := range *sinks + 1 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		addrs = append(addrs, ln.Addr().String())
		serve := func(c net.Conn) { _, _ = io.Copy(io.Discard, c) }
		if i == *sinks {
			serve = func(c net.Conn) { _, _ = io.Copy(c, c) }
		}
		go acceptLoop(ln, serve)
	}
	fmt.Println(strings.Join(addrs, " "))
	_, _ = io.Copy(io.Discard, os.Stdin)
	return nil
}

func acceptLoop(ln net.Listener, serve func(net.Conn)) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			serve(c)
		}()
	}
}

// clientsRole is the clients process: -n connections to -front, each sending 64 bytes every
// -send-every, and a probe doing a 16-byte round trip through -probe every -probe-every.
type clientsRole struct {
	mu      sync.Mutex
	label   string                     // the method being measured; "" between windows
	samples map[string][]time.Duration // probe round trips by label
	during  map[string][]time.Duration // those of them that overlapped a read
	reading atomic.Bool                // a read is running (between "read 1" and "read 0")
	wErrs   atomic.Int64               // failed writes of the connections
}

// runClients connects, prints "ready", then obeys stdin: "begin <label>" files the probe's
// round trips under label, "end" stops filing them, "read 1" and "read 0" say when a read
// runs, "report" prints one line per label ("probe <label> <n> <p50 µs> <p99 µs> <max µs>
// <n during reads> <p50 µs> <p99 µs> of those during reads"), then "writeerrors <n>" and "done".
func runClients(args []string) error {
	fs := flag.NewFlagSet("clients", flag.ContinueOnError)
	front := fs.String("front", "", "HAProxy frontend of the measured backend")
	probe := fs.String("probe", "", "HAProxy frontend of the echo server")
	n := fs.Int("n", 0, "connections")
	sendEvery := fs.Duration("send-every", 5*time.Second, "each connection sends this often")
	probeEvery := fs.Duration("probe-every", 20*time.Millisecond, "probe round trips this often")
	if err := fs.Parse(args); err != nil {
		return err
	}
	conns, err := dialAll(*front, *n)
	if err != nil {
		return err
	}
	p, err := net.DialTimeout("tcp", *probe, 10*time.Second)
	if err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	r := &clientsRole{samples: map[string][]time.Duration{}, during: map[string][]time.Duration{}}
	go r.sendLoop(conns, *sendEvery)
	go func() {
		// A probe that cannot go through HAProxy measures nothing: end the process, which
		// the parent sees at its next command.
		err := r.probeLoop(p, *probeEvery)
		fmt.Fprintf(os.Stderr, "fastsignalbench clients: probe: %v\n", err)
		os.Exit(1)
	}()
	fmt.Println("ready")
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		r.command(in.Text())
	}
	return nil
}

func (r *clientsRole) command(line string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch cmd, arg, _ := strings.Cut(line, " "); cmd {
	case "begin":
		r.label = arg
	case "end":
		r.label = ""
	case "read":
		r.reading.Store(arg == "1")
	case "report":
		for _, label := range slices.Sorted(maps.Keys(r.samples)) {
			s, d := r.samples[label], r.during[label]
			slices.Sort(s)
			slices.Sort(d)
			fmt.Printf("probe %s %d %d %d %d %d %d %d\n", label, len(s), quantile(s, 0.50).Microseconds(),
				quantile(s, 0.99).Microseconds(), s[len(s)-1].Microseconds(),
				len(d), quantile(d, 0.50).Microseconds(), quantile(d, 0.99).Microseconds())
		}
		fmt.Printf("writeerrors %d\ndone\n", r.wErrs.Load())
		clear(r.samples)
		clear(r.during)
	}
}

// dialAll opens n connections to addr, 32 at a time.
func dialAll(addr string, n int) ([]net.Conn, error) {
	conns := make([]net.Conn, n)
	next := make(chan int, n)
	for i := range n {
		next <- i
	}
	close(next)
	var wg sync.WaitGroup
	var firstErr error
	var once sync.Once
	for range 32 {
		wg.Go(func() {
			for i := range next {
				c, err := net.DialTimeout("tcp", addr, 10*time.Second)
				if err != nil {
					once.Do(func() { firstErr = fmt.Errorf("connection %d to %s: %w", i, addr, err) })
					return
				}
				conns[i] = c
			}
		})
	}
	wg.Wait()
	return conns, firstErr
}

// sendLoop writes 64 bytes to each connection once per period, spread evenly over it (a few
// connections every 50 ms), so that every stream stays live and HAProxy's load is steady.
func (r *clientsRole) sendLoop(conns []net.Conn, period time.Duration) {
	const tick = 50 * time.Millisecond
	per := max(1, int(math.Ceil(float64(len(conns))*float64(tick)/float64(period))))
	payload := make([]byte, 64)
	t := time.NewTicker(tick)
	defer t.Stop()
	for i := 0; ; {
		<-t.C
		for range per {
			c := conns[i%len(conns)]
			i++
			_ = c.SetWriteDeadline(time.Now().Add(time.Second))
			if _, err := c.Write(payload); err != nil {
				r.wErrs.Add(1)
			}
		}
	}
}

// probeLoop does one 16-byte round trip through HAProxy every period and files its time.
func (r *clientsRole) probeLoop(c net.Conn, period time.Duration) error {
	out, back := make([]byte, 16), make([]byte, 16)
	t := time.NewTicker(period)
	defer t.Stop()
	for range t.C {
		if err := c.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
			return err
		}
		began := time.Now()
		during := r.reading.Load()
		if _, err := c.Write(out); err != nil {
			return err
		}
		if _, err := io.ReadFull(c, back); err != nil {
			return err
		}
		took := time.Since(began)
		during = during || r.reading.Load()
		r.mu.Lock()
		if r.label != "" {
			r.samples[r.label] = append(r.samples[r.label], took)
			if during {
				r.during[r.label] = append(r.during[r.label], took)
			}
		}
		r.mu.Unlock()
	}
	return nil
}

// quantile of sorted s (nearest rank).
func quantile(s []time.Duration, q float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}
