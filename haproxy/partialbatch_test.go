package haproxy

import (
	"bufio"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// startCutCLI is a fake runtime socket that answers the session set-up and
// the first answered commands of a request, then stalls (or closes, with
// closeAfter): HAProxy hung or restarted in the middle of a batch.
func startCutCLI(t *testing.T, answered int, closeAfter bool) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "cut.sock")
	l, err := net.Listen("unix", path)
	require.NoError(t, err)
	done := make(chan struct{})
	var wg sync.WaitGroup
	t.Cleanup(func() { close(done); l.Close(); wg.Wait() })
	wg.Go(func() {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		sc := bufio.NewScanner(conn)
		for sc.Scan() && sc.Text() != "quit" {
		}
		_, _ = conn.Write([]byte(strings.Repeat("\n> ", 2+answered)))
		if !closeAfter {
			<-done
		}
	})
	return path
}

// TestCutBatchSaysHowFarHAProxyGot: a batch cut after HAProxy answered some
// of its weights stays a failure of the whole batch (the process that took
// them may be gone), but the error says how many were answered and from
// which server on nothing is known, so the operator knows what to look at.
func TestCutBatchSaysHowFarHAProxyGot(t *testing.T) {
	changes := []weighter.Change{{Server: "s0", Weight: 1}, {Server: "s1", Weight: 2}, {Server: "s2", Weight: 3},
		{Server: "s3", Weight: 4}, {Server: "s4", Weight: 5}}
	for name, closeAfter := range map[string]bool{"stalled": false, "closed": true} {
		t.Run(name, func(t *testing.T) {
			c := fakeClient(t, startCutCLI(t, 3, closeAfter))
			err := c.Backend("be").SetWeights(testCtx(t), changes)
			require.Error(t, err)
			var se *weighter.ServerError
			assert.False(t, errors.As(err, &se), "not attributed per server: %v", err)
			assert.Contains(t, err.Error(), "3 of 5 weights answered")
			assert.Contains(t, err.Error(), "no reply from s3 on")
		})
	}
}
