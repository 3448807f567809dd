package loadlab

import (
	"bytes"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
)

// Sink is one backend server: a TCP listener that reads and counts every byte it is
// sent (and, if asked, every line: one datapoint each), standing in for a service that
// ingests data from long-lived clients.
type Sink struct {
	Name  string
	ln    net.Listener
	lines bool
	bytes atomic.Int64
	count atomic.Int64 // lines received, when lines

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// StartSinks opens n sinks, named s1..sn, on free loopback ports. With lines, each
// also counts the newlines it receives (see Lines).
func StartSinks(n int, lines bool) ([]*Sink, error) {
	sinks := make([]*Sink, 0, n)
	for i := range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			CloseSinks(sinks)
			return nil, fmt.Errorf("listen for sink %d: %w", i+1, err)
		}
		s := &Sink{Name: fmt.Sprintf("s%d", i+1), ln: ln, lines: lines, conns: map[net.Conn]struct{}{}}
		s.wg.Add(1)
		go s.accept()
		sinks = append(sinks, s)
	}
	return sinks, nil
}

// Addr is the sink's listening address.
func (s *Sink) Addr() string { return s.ln.Addr().String() }

// Bytes is how many bytes the sink has received.
func (s *Sink) Bytes() int64 { return s.bytes.Load() }

// Lines is how many lines ('\n') the sink has received; 0 unless started with lines.
func (s *Sink) Lines() int64 { return s.count.Load() }

// Open is how many connections the sink has open now: its server's sessions as HAProxy
// counts them (scur), seen from the server's side.
func (s *Sink) Open() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

func (s *Sink) accept() {
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

func (s *Sink) serve(c net.Conn) {
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
		if s.lines && n > 0 {
			s.count.Add(int64(bytes.Count(buf[:n], []byte{'\n'})))
		}
		if err != nil {
			return // EOF from the client, or closed by Close()
		}
	}
}

// Close stops accepting, closes every open connection and waits for all goroutines.
func (s *Sink) Close() {
	s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// CloseSinks closes every sink.
func CloseSinks(sinks []*Sink) {
	for _, s := range sinks {
		s.Close()
	}
}

// ReadBytes returns every sink's byte counter, in sink order.
func ReadBytes(sinks []*Sink) []int64 {
	out := make([]int64, len(sinks))
	for i, s := range sinks {
		out[i] = s.Bytes()
	}
	return out
}

// ReadOpen returns every sink's open connections, in sink order.
func ReadOpen(sinks []*Sink) []int {
	out := make([]int, len(sinks))
	for i, s := range sinks {
		out[i] = s.Open()
	}
	return out
}

// ReadLines returns every sink's line counter, in sink order.
func ReadLines(sinks []*Sink) []int64 {
	out := make([]int64, len(sinks))
	for i, s := range sinks {
		out[i] = s.Lines()
	}
	return out
}
