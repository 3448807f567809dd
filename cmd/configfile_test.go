package cmd

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A FIFO given as the configuration hung validate and run in open until
// something wrote to it. It is refused at once, as is any non-regular file.
func TestConfigFIFORefused(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	for _, args := range [][]string{
		{"validate", fifo},
		{"run", "--config", fifo},
		{"once", "--config", fifo},
	} {
		done := make(chan error, 1)
		go func() {
			_, _, err := execute(t, args...)
			done <- err
		}()
		select {
		case err := <-done:
			assert.ErrorContains(t, err, fifo+": not a regular file: a named pipe (FIFO)", args[0])
		case <-time.After(10 * time.Second):
			t.Fatalf("%v: still blocked on a FIFO after 10s", args)
		}
	}
}
