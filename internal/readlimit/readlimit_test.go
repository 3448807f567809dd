package readlimit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

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

	_, err = ReadFile("/dev/zero", 1<<20)
	assert.ErrorIs(t, err, ErrTooLarge, "an endless file ends at the limit")
	assert.ErrorContains(t, err, "file too large (over 1 MiB)")

	_, err = ReadFile(filepath.Join(t.TempDir(), "missing"), 1)
	assert.ErrorIs(t, err, os.ErrNotExist)
}
