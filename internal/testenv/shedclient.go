package testenv

import (
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// ShedTick is how often a ShedClient writes its chunk.
const ShedTick = 20 * time.Millisecond

// ShedClient is one client connection through HAProxy, writing steadily and
// reading until HAProxy closes it: a session the shed planner may close.
type ShedClient struct {
	Conn   net.Conn
	Closed atomic.Bool   // the client saw its connection closed
	Done   chan struct{} // closed when the reader returned
}

// DialShedClient connects through addr and writes chunk bytes every
// ShedTick, until the test ends.
func DialShedClient(t testing.TB, addr string, chunk int) *ShedClient {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	// A first write makes HAProxy pick a server now, so that leastconn
	// places the connections in the order they are made.
	if _, err := c.Write(make([]byte, chunk)); err != nil {
		t.Fatal(err)
	}
	sc := &ShedClient{Conn: c, Done: make(chan struct{})}
	go func() {
		defer close(sc.Done)
		_, _ = io.Copy(io.Discard, c) // the sink servers send nothing: this returns when HAProxy closes
		sc.Closed.Store(true)
	}()
	WriteEvery(t, c, chunk, ShedTick)
	t.Cleanup(func() { c.Close() })
	return sc
}
