package testenv

import (
	"net"
	"testing"
	"time"
)

// WriteEvery writes n bytes to c every period, from a goroutine, until a
// write fails or the test ends; at the end it stops the goroutine and waits
// for it. It is a client's steady upload through HAProxy: n/period bytes a
// second on the server the connection went to.
func WriteEvery(t testing.TB, c net.Conn, n int, period time.Duration) {
	t.Helper()
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		buf := make([]byte, n)
		tick := time.NewTicker(period)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				if _, err := c.Write(buf); err != nil {
					return
				}
			}
		}
	}()
	t.Cleanup(func() {
		close(done)
		_ = c.SetWriteDeadline(time.Now()) // a write blocked on a full socket ends now
		<-stopped
	})
}
