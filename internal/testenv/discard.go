package testenv

import (
	"io"
	"net"
	"testing"
)

// StartDiscardServer listens on a free loopback port, accepts connections and
// reads them to EOF (holding them open until the peer closes), until the test
// ends. It returns the "127.0.0.1:port" address: a backend server for HAProxy.
func StartDiscardServer(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("discard server: %v", err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(io.Discard, c); c.Close() }()
		}
	}()
	return ln.Addr().String()
}
