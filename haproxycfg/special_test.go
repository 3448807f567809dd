package haproxycfg

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A config_file that is not a regular file (a FIFO nobody writes to, a
// device) is refused at once: reading it would block the daemon's start or
// reload, and with it the weighting, or read without end.
func TestReadRefusesWhatIsNotAFile(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "haproxy.cfg")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	for _, path := range []string{fifo, "/dev/zero"} {
		done := make(chan error, 1)
		go func() { _, err := Read(path); done <- err }()
		select {
		case err := <-done:
			require.Error(t, err, path)
			assert.Contains(t, err.Error(), path+": not a regular file")
		case <-time.After(10 * time.Second): // a hang, not a speed limit
			t.Fatalf("Read(%s) did not return", path)
		}
	}
}
