package cmd

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// resetFlag puts a flag of a subcommand back to its default after the test:
// cobra keeps flag values between runs of rootCmd.
func resetFlag(t *testing.T, command, flag string) {
	t.Helper()
	c, _, err := rootCmd.Find([]string{command})
	require.NoError(t, err)
	t.Cleanup(func() {
		f := c.Flags().Lookup(flag)
		_ = f.Value.Set(f.DefValue)
		f.Changed = false
	})
}

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
		resetFlag(t, args[0], "config")
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
