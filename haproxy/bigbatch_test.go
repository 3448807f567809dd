package haproxy

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/duration"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// startSlowCLI is a fake runtime socket that, like HAProxy, reads one command at
// a time and answers it before reading the next, pausing 5 ms every 50 commands
// (as HAProxy does on a big random or consistent-hash backend): 20,000 take 2 s.
// `show servers state` gets an empty server list.
func startSlowCLI(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "slow.sock")
	l, err := net.Listen("unix", path)
	require.NoError(t, err)
	var wg sync.WaitGroup
	t.Cleanup(func() { l.Close(); wg.Wait() })
	wg.Go(func() {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		sc := bufio.NewScanner(conn)
		w := bufio.NewWriter(conn)
		for i := 0; sc.Scan() && sc.Text() != "quit"; i++ {
			if strings.HasPrefix(sc.Text(), "show servers state") {
				w.WriteString("1\n# be_id be_name\n")
			}
			w.WriteString("\n> ")
			if i%50 == 0 {
				if w.Flush() != nil {
					return
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
		_ = w.Flush()
	})
	return path
}

// TestBatchLargerThanSocketBuffersIsNotCut: a batch too big for the socket
// buffers is written while HAProxy works through it. Only silence may time the
// write out, not the batch's length (the read side already works that way),
// nor the kernel waking a blocked writer only once half the send buffer has
// drained: at this pace that takes longer than the timeout, while the replies
// keep coming (the write timed out at ~3,500 of 20,000 commands).
func TestBatchLargerThanSocketBuffersIsNotCut(t *testing.T) {
	// A batch of 2 s, four times the socket's timeout; each stall 5 ms, a
	// hundred times shorter than it (a loaded machine running the tests in
	// parallel stalls the fake for tens of milliseconds, not 500).
	c, err := New(Config{Socket: startSlowCLI(t), Timeout: duration.Duration(500 * time.Millisecond)})
	require.NoError(t, err)
	changes := make([]weighter.Change, 20000)
	for i := range changes {
		changes[i] = weighter.Change{Server: fmt.Sprintf("s%d", i), Weight: 7}
	}
	err = c.Backend("be").SetWeights(testCtx(t), changes)
	// The fake's read-back lists no servers, so every change is unconfirmed;
	// what matters is that the whole batch went through.
	require.Error(t, err)
	assert.NotErrorIs(t, err, os.ErrDeadlineExceeded)
	assert.ErrorContains(t, err, "wrote weight 7, read back 0 (present false)")
}
