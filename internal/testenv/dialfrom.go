package testenv

import (
	"net"
	"testing"
)

// DialFrom connects to addr from the source address src (a loopback
// address 127.0.0.N: distinct clients as HAProxy and the socket table see
// them, from one test process), writes n bytes, and closes the connection
// when the test ends.
func DialFrom(t testing.TB, src, addr string, n int) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("connect from %s to %s: %v", src, addr, err)
	}
	t.Cleanup(func() { c.Close() })
	if n > 0 {
		if _, err := c.Write(make([]byte, n)); err != nil {
			t.Fatalf("write %d bytes from %s to %s: %v", n, src, addr, err)
		}
	}
	return c
}
