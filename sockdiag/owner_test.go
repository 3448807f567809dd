package sockdiag

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
)

// fakeDescriptor makes /proc/<pid>/fd/<fd> under root a link to socket:[inode].
func fakeDescriptor(t *testing.T, root string, pid, fd int, inode uint32) {
	t.Helper()
	dir := filepath.Join(root, fmt.Sprint(pid), "fd")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.Symlink(fmt.Sprintf("socket:[%d]", inode), filepath.Join(dir, fmt.Sprint(fd))))
}

// TestInodeOpenedAfterTheListingIsHAProxys: a read lists HAProxy's
// descriptors when it meets the first new inode; a connection HAProxy opens
// after that listing and the dump meets later (the kernel walks the table
// again for each part of a dump) is not in it. It is settled by a listing
// after the dump, in the same read, and stays HAProxy's; an inode no listing
// has is another process's for good, without a listing each read.
func TestInodeOpenedAfterTheListingIsHAProxys(t *testing.T) {
	root := t.TempDir()
	const pid = 4242
	fakeDescriptor(t, root, pid, 10, 1001)
	ctx := testenv.Context(t, 10*time.Second)
	s := newInodeSet()

	mine, sure, err := s.owned(ctx, root, []int{pid}, 1001)
	require.NoError(t, err)
	assert.True(t, mine && sure, "the inode that started the listing is in it")
	fakeDescriptor(t, root, pid, 11, 1002) // HAProxy connects after the listing
	mine, sure, err = s.owned(ctx, root, []int{pid}, 1002)
	require.NoError(t, err)
	assert.False(t, mine || sure, "met after the listing: not known yet")
	mine, sure, err = s.owned(ctx, root, []int{pid}, 2001) // another process's
	require.NoError(t, err)
	assert.False(t, mine || sure)
	got, err := s.settle(ctx, root, []int{pid})
	require.NoError(t, err)
	assert.Equal(t, map[uint32]bool{1002: true, 2001: false}, got)
	assert.Equal(t, 2, s.scans, "one listing at the first new inode, one after the dump")
	s.endRead()

	// The next read knows all three without listing again.
	for ino, want := range map[uint32]bool{1001: true, 1002: true, 2001: false} {
		mine, sure, err := s.owned(ctx, root, []int{pid}, ino)
		require.NoError(t, err)
		assert.Equal(t, want, mine, "inode %d", ino)
		assert.True(t, sure)
	}
	got, err = s.settle(ctx, root, []int{pid})
	require.NoError(t, err)
	assert.Empty(t, got)
	s.endRead()
	assert.Equal(t, 2, s.scans, "no listing when nothing is new")
}
