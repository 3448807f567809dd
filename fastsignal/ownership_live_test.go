package fastsignal

import (
	"cmp"
	"log/slog"
	"net/netip"
	"testing"
	"time"

	"github.com/haproxy-weighter/haproxy-weighter/haproxy"
	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/haproxy-weighter/haproxy-weighter/sockdiag"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestKernelStartLineSaysWhoseUID: when the socket table tells HAProxy's
// sockets by uid (a daemon that cannot read HAProxy's descriptors; forced
// here, the test being root) and HAProxy runs as root, the start line says
// whose uid (ownership_uid="0 (root)", not only ownership=uid) and a
// warning says, once, that every root process's connections to the
// servers count as HAProxy's, and what to do. By inode, neither.
func TestKernelStartLineSaysWhoseUID(t *testing.T) {
	h := testenv.StartTwoServers(t, [2]string{testenv.StartDiscardServer(t), testenv.StartDiscardServer(t)}, "weight 100")
	h.Client(t, 100, 50*time.Millisecond)
	for _, tc := range []struct {
		force sockdiag.Ownership
		want  []string
		not   []string
	}{
		{force: sockdiag.OwnerUID, want: []string{`ownership=uid ownership_uid="0 (root)"`,
			`level=WARN msg="socket table counts root's connections as HAProxy's"`, "by uid 0", "CAP_SYS_PTRACE"}},
		{force: "", want: []string{"ownership=inode"}, not: []string{"ownership_uid", "level=WARN"}},
	} {
		t.Run(cmp.Or(string(tc.force), "inode"), func(t *testing.T) {
			var logs testenv.SyncBuffer
			log := slog.New(slog.NewTextHandler(&logs, nil))
			c, err := haproxy.New(haproxy.Config{Socket: h.Socket})
			require.NoError(t, err)
			hb := c.Backend("be")
			k := newKernelReader(hb, c, false, weighter.BytesIn, log)
			k.reader = sockdiag.New(sockdiag.Config{PIDs: k.haproxyPIDs(c, "/proc"), Ownership: tc.force})
			k.local = sockdiag.NewLocalReader(k.reader, func(servers []weighter.ServerState) (map[string]netip.AddrPort, error) {
				return haproxy.ServerAddrs(servers), nil
			}, weighter.BytesIn)
			chain := newChain("be", k, nil, nil, log)
			ctx := testenv.Context(t, 10*time.Second)
			servers, err := hb.Servers(ctx)
			require.NoError(t, err)
			_, err = chain.ReadLocal(ctx, servers)
			require.NoError(t, err)
			log.Info("weighting by the fast signal", chain.StartAttrs()...)
			chain.WarnRootUID(ctx, log, slog.LevelWarn)
			t.Log(logs.String())
			for _, w := range tc.want {
				assert.Contains(t, logs.String(), w)
			}
			for _, n := range tc.not {
				assert.NotContains(t, logs.String(), n)
			}
		})
	}
}
