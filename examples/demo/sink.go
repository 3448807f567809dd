package main

import (
	"fmt"
	"net"
	"sync"
	"sync/atomic"
)

// sink is one backend server of the demo: a TCP listener that reads and counts every
// byte it is sent, standing in for a service that ingests data from long-lived clients.
type sink struct {
	name  string
	ln    net.Listener
	bytes atomic.Int64

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// startSinks opens n sinks on free loopback ports.
func startSinks(n int) ([]*sink, error) {
	sinks := make([]*sink, 0, n)
	for i := range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			closeSinks(sinks)
			return nil, fmt.Errorf("listen for sink %d: %w", i+1, err)
		}
		s := &sink{name: fmt.Sprintf("s%d", i+1), ln: ln, conns: map[net.Conn]struct{}{}}
		s.wg.Add(1)
		go s.accept()
		sinks = append(sinks, s)
	}
	return sinks, nil
}

func (s *sink) addr() string { return s.ln.Addr().String() }

func (s *sink) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return // listener closed
		}
		s.mu.Lock()
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		s.wg.Add(1)
		go s.serve(c)
	}
}

func (s *sink) serve(c net.Conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.Close()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := c.Read(buf)
		s.bytes.Add(int64(n))
		if err != nil {
			return // EOF from the client, or closed by close()
		}
	}
}

// close stops accepting, closes every open connection and waits for all goroutines.
func (s *sink) close() {
	s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func closeSinks(sinks []*sink) {
	for _, s := range sinks {
		s.close()
	}
}

// readBytes returns every sink's byte counter, in sink order.
func readBytes(sinks []*sink) []int64 {
	out := make([]int64, len(sinks))
	for i, s := range sinks {
		out[i] = s.bytes.Load()
	}
	return out
}
