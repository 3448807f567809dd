package sockdiag

import (
	"encoding/csv"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
)

// otherNetNS starts a process in a network namespace of its own (`unshare
// -n`, which needs root or CAP_SYS_ADMIN) and returns a descriptor of that
// namespace: a Reader given it reads the table a daemon outside HAProxy's
// namespace would.
func otherNetNS(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("unshare", "-n", "sleep", "600")
	require.NoError(t, cmd.Start(), "unshare -n (needs root or CAP_SYS_ADMIN)")
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	mine, err := os.Readlink("/proc/self/ns/net")
	require.NoError(t, err)
	path := "/proc/" + strconv.Itoa(cmd.Process.Pid) + "/ns/net"
	deadline := time.Now().Add(10 * time.Second)
	for {
		// unshare execs sleep once the namespace is made.
		if l, err := os.Readlink(path); err == nil && l != mine {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("unshare -n: %s never left %s", path, mine)
		}
		time.Sleep(5 * time.Millisecond)
	}
	f, err := os.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	return int(f.Fd())
}

// TestNotVisibleFromAnotherNetworkNamespace: read from another network
// namespace, HAProxy's connections are not in the table. With HAProxy's pid
// visible, Read says so at once; without (a sidecar in another pid
// namespace), Check does after three reads that find HAProxy's sessions
// (`show stat` scur) and no socket. The same checks in HAProxy's namespace
// find nothing wrong.
func TestNotVisibleFromAnotherNetworkNamespace(t *testing.T) {
	srv := startReplyServer(t, "127.0.0.1", replyBytes)
	servers := map[string]netip.AddrPort{"s1": srv}
	h, fe := startHAProxy(t, "", servers)
	dial(t, fe, 1000)
	ns := otherNetNS(t)

	_, err := New(Config{PIDs: pidOf(h), NetNS: ns}).Read(testenv.Context(t, 10*time.Second), servers)
	require.ErrorIs(t, err, ErrNotVisible)
	var nv *NotVisibleError
	require.ErrorAs(t, err, &nv)
	assert.Contains(t, nv.Reason, "network namespace")

	scur := func() map[string]int { return showStatScur(t, h.Socket, "be") }
	home := New(Config{})
	waitRead(t, home, servers, func(g TableReading) bool { return g.Servers["s1"].Open == 1 })
	require.Equal(t, 1, scur()["s1"])

	away := New(Config{NetNS: ns})
	for i := 1; i <= notVisibleAfter; i++ {
		got, err := away.Read(testenv.Context(t, 10*time.Second), servers)
		require.NoError(t, err)
		assert.Zero(t, got.Matched)
		err = away.Check(got, scur())
		if i < notVisibleAfter {
			require.NoError(t, err, "read %d", i)
			continue
		}
		require.ErrorIs(t, err, ErrNotVisible)
		t.Log(err)
	}
	for range notVisibleAfter + 1 {
		got, err := home.Read(testenv.Context(t, 10*time.Second), servers)
		require.NoError(t, err)
		require.NoError(t, home.Check(got, scur()))
	}
}

// showStatScur reads `show stat` from HAProxy's runtime socket and returns
// the current sessions (scur) of backend's servers. Written here rather than
// through package haproxy: the test needs one column, not the client.
func showStatScur(t *testing.T, socket, backend string) map[string]int {
	t.Helper()
	c, err := net.Dial("unix", socket)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetDeadline(time.Now().Add(5*time.Second)))
	_, err = c.Write([]byte("show stat\n"))
	require.NoError(t, err)
	raw, err := io.ReadAll(c)
	require.NoError(t, err)
	rows, err := csv.NewReader(strings.NewReader(strings.TrimPrefix(strings.TrimSpace(string(raw)), "# "))).ReadAll()
	require.NoError(t, err)
	col := map[string]int{}
	for i, name := range rows[0] {
		col[name] = i
	}
	out := map[string]int{}
	for _, row := range rows[1:] {
		if row[col["pxname"]] != backend || row[col["svname"]] == "BACKEND" {
			continue
		}
		n, err := strconv.Atoi(row[col["scur"]])
		require.NoError(t, err)
		out[row[col["svname"]]] = n
	}
	return out
}
