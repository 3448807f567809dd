package haproxy

import (
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

func TestAdminStateBits(t *testing.T) {
	for bits, want := range map[uint64]weighter.AdminState{
		0: weighter.AdminReady, 0x01: weighter.AdminMaint, 0x02: weighter.AdminMaint, 0x04: weighter.AdminReady,
		0x05: weighter.AdminMaint, 0x08: weighter.AdminDrain, 0x10: weighter.AdminDrain, 0x09: weighter.AdminMaint,
		0x20: weighter.AdminMaint, 0x40: weighter.AdminReady, 0x18: weighter.AdminDrain, 0x0c: weighter.AdminDrain,
	} {
		assert.Equal(t, want, adminState(bits), "bits %#x", bits)
	}
}

func TestReadRepliesAcrossReads(t *testing.T) {
	out := "\n> \n> \n> [3]: No such server.\n\n> 7 (initial 1)\n> "
	replies, err := readReplies(iotest.OneByteReader(strings.NewReader(out+"trailing")), 5, nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"", "", "", "[3]: No such server.", "7 (initial 1)"}, replies)

	_, err = readReplies(strings.NewReader(out), 6, nil)
	require.ErrorIs(t, err, ErrBadReply)
}

func TestReplyError(t *testing.T) {
	assert.NoError(t, replyError(""))
	assert.NoError(t, replyError("[6]: New server registered."))
	assert.EqualError(t, replyError("[3]: No such server."), "No such server")
	assert.ErrorIs(t, replyError("ok"), ErrBadReply)
}

func TestConfig(t *testing.T) {
	for socket, network := range map[string]string{
		"/run/haproxy/admin.sock": "unix", "admin.sock": "unix", "./a:b.sock": "unix",
		"127.0.0.1:9999": "tcp", "[::1]:9999": "tcp", "lb1:9999": "tcp",
	} {
		assert.Equal(t, network, Config{Socket: socket}.network(), socket)
	}
	assert.Equal(t, DefaultTimeout, Config{}.timeout())
	assert.Error(t, Config{}.Validate())
	assert.Error(t, Config{Socket: "/s", Timeout: -1}.Validate())
	assert.NoError(t, Config{Socket: "/s"}.Validate())
}

func TestParseStatWithoutRowsIsAnError(t *testing.T) {
	// A reply cut right after "# " has no header fields at all; it must be a
	// bad reply, not an index out of range that takes the daemon down.
	for _, out := range []string{"# ", "# \n", "# \n\n"} {
		_, err := parseStat(out)
		require.ErrorIs(t, err, ErrBadReply, "%q", out)
	}
}

func TestServersStateWithDuplicateServerIsAnError(t *testing.T) {
	line := "2 be 1 s1 127.0.0.1 2 0 1 1 0 1 0 2 0 0 0 0 - 19001 - 0 0 - - 0"
	_, err := parseServersState("be", "1\n# be_id be_name\n"+line+"\n"+line)
	require.ErrorIs(t, err, ErrBadReply)
	assert.Contains(t, err.Error(), "s1")
}

// endless is a peer that streams without ever prompting (up to twice the bound,
// to keep a regression finite); read counts what it gave.
type endless struct{ read int }

var xs = []byte(strings.Repeat("x", 32<<10))

func (e *endless) Read(p []byte) (int, error) {
	if e.read > 2*maxReply {
		return 0, io.EOF
	}
	n := copy(p, xs)
	e.read += n
	return n, nil
}

func TestEndlessReplyIsCut(t *testing.T) {
	// Only silence times a read out, so without a size bound a peer that never
	// stops talking (not HAProxy) grows the buffer until the cycle timeout.
	e := &endless{}
	_, err := readReplies(e, 3, nil)
	require.ErrorIs(t, err, ErrBadReply)
	assert.Contains(t, err.Error(), "larger than")
	assert.LessOrEqual(t, e.read, maxReply+64<<10)
}
