package readlimit

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReadFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	require.NoError(t, os.WriteFile(path, []byte(strings.Repeat("x", 1024)), 0o600))

	data, err := ReadFile(path, 1024)
	require.NoError(t, err)
	assert.Len(t, data, 1024, "a file of exactly the limit is read whole")

	_, err = ReadFile(path, 1023)
	assert.ErrorIs(t, err, ErrTooLarge)
	assert.ErrorContains(t, err, path+": file too large (over 1023 bytes)")

	_, err = ReadFile(filepath.Join(t.TempDir(), "missing"), 1)
	assert.ErrorIs(t, err, os.ErrNotExist)
}

// A FIFO given as the configuration blocked open until something wrote to it,
// so validate and run hung without a word; a device (/dev/zero) or a
// directory is no configuration either. Each is refused at once, by kind.
func TestReadFileRefusesNonRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	for path, kind := range map[string]string{
		fifo:        "a named pipe (FIFO)",
		"/dev/zero": "a character device",
		dir:         "a directory",
	} {
		done := make(chan error, 1)
		go func() {
			_, err := ReadFile(path, 1<<20)
			done <- err
		}()
		select {
		case err := <-done:
			assert.ErrorIs(t, err, ErrNotRegular, path)
			assert.ErrorContains(t, err, path+": not a regular file: "+kind, path)
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: ReadFile still blocked after 5s", path)
		}
	}
}
