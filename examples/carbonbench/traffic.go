package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/examples/internal/loadlab"
)

// forwarder gives one carbon-relay its own source address: carbon-relay cannot bind one
// (carbon/client.py connects with reactor.connectTCP, no bindAddress), so the relay's
// destination is this listener, and each connection the relay opens is carried to
// HAProxy over a connection from src, 127.0.0.N. When either side closes (HAProxy shed
// the session, the relay stopped), both do: the relay sees its destination go and
// reconnects, as it would to HAProxy directly.
type forwarder struct {
	ln    net.Listener
	src   net.IP
	to    string
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns map[net.Conn]struct{}
	opens atomic.Int64 // connections carried to HAProxy (1 + reconnects)
}

func startForwarder(src net.IP, to string) (*forwarder, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("forwarder for %s: %w", src, err)
	}
	f := &forwarder{ln: ln, src: src, to: to, conns: map[net.Conn]struct{}{}}
	f.wg.Add(1)
	go f.accept()
	return f, nil
}

func (f *forwarder) addr() string { return f.ln.Addr().String() }

func (f *forwarder) track(c net.Conn, on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if on {
		f.conns[c] = struct{}{}
	} else {
		delete(f.conns, c)
	}
}

func (f *forwarder) accept() {
	defer f.wg.Done()
	for {
		in, err := f.ln.Accept()
		if err != nil {
			return
		}
		d := net.Dialer{Timeout: 2 * time.Second, LocalAddr: &net.TCPAddr{IP: f.src}}
		out, err := d.Dial("tcp", f.to)
		if err != nil {
			in.Close()
			continue
		}
		f.opens.Add(1)
		f.track(in, true)
		f.track(out, true)
		f.wg.Add(2)
		pipe := func(dst, src net.Conn) {
			defer f.wg.Done()
			_, _ = io.Copy(dst, src)
			in.Close()
			out.Close()
			f.track(in, false)
			f.track(out, false)
		}
		go pipe(out, in)
		go pipe(in, out)
	}
}

// close stops accepting and closes every connection it carries.
func (f *forwarder) close() {
	f.ln.Close()
	f.mu.Lock()
	for c := range f.conns {
		c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
}

// generator feeds one relay rate datapoints/s over one plaintext connection, in whole
// lines every tick, and counts the lines the kernel accepted. A client that falls behind
// (the relay's flow control paused it) keeps at most 2 s of lines, as a sender's buffer
// would; older ones are not sent (nor counted).
type generator struct {
	relay int
	rate  float64
	addr  string
	sent  atomic.Int64
}

// lineLen is every datapoint line's length: "bench.relayR.mMM 1 <10-digit time>\n".
func line(relay, metric int, ts int64) string {
	return fmt.Sprintf("bench.relay%d.m%02d 1 %d\n", relay, metric, ts)
}

func (g *generator) run(ctx context.Context) {
	var c net.Conn
	defer func() {
		if c != nil {
			c.Close()
		}
	}()
	tk := time.NewTicker(loadlab.Tick)
	defer tk.Stop()
	owed, metric := 0.0, 0
	var buf []byte
	for {
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
		}
		owed = min(owed+g.rate*loadlab.Tick.Seconds(), 2*g.rate+1)
		if c == nil {
			var d net.Dialer
			var err error
			if c, err = d.DialContext(ctx, "tcp", g.addr); err != nil {
				c = nil
				continue
			}
		}
		n := int(owed)
		if n == 0 {
			continue
		}
		buf = buf[:0]
		ts := time.Now().Unix()
		for range n {
			buf = append(buf, line(g.relay, metric, ts)...)
			metric = (metric + 1) % 20
		}
		_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
		w, err := c.Write(buf)
		full := w / len(line(g.relay, 0, ts)) // every line of one tick has the same length
		g.sent.Add(int64(full))
		owed -= float64(full)
		if err != nil {
			c.Close() // a partial line is a bad line to carbon: dropped, not counted
			c = nil
		}
	}
}
