package sockdiag

import (
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/haproxy"
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

	_, err := New(Config{PIDs: pidOf(h), NetNS: ns}).Read(testCtx(t), servers)
	require.ErrorIs(t, err, ErrNotVisible)
	var nv *NotVisibleError
	require.ErrorAs(t, err, &nv)
	assert.Contains(t, nv.Reason, "network namespace")

	c, err := haproxy.New(haproxy.Config{Socket: h.Socket})
	require.NoError(t, err)
	scur := func() map[string]int {
		st, err := c.Stats(testCtx(t), "be")
		require.NoError(t, err)
		out := map[string]int{}
		for _, s := range st {
			out[s.Server] = int(s.CurrentSessions)
		}
		return out
	}
	home := New(Config{})
	waitRead(t, home, servers, func(g Reading) bool { return g.Servers["s1"].Open == 1 })
	require.Equal(t, 1, scur()["s1"])

	away := New(Config{NetNS: ns})
	for i := 1; i <= notVisibleAfter; i++ {
		got, err := away.Read(testCtx(t), servers)
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
		got, err := home.Read(testCtx(t), servers)
		require.NoError(t, err)
		require.NoError(t, home.Check(got, scur()))
	}
}
