package daemon

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/fastsignal"
	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
)

// TestFastSignalSessionsPinned: a daemon with fast_signal: sessions on a
// real HAProxy, where the kernel's socket table can be read, weighs by show
// sess all and says so in each server's reason.
func TestFastSignalSessionsPinned(t *testing.T) {
	h := testenv.StartTwoServers(t, [2]string{testenv.StartDiscardServer(t), testenv.StartDiscardServer(t)}, "weight 100")
	h.Client(t, 2000, 20*time.Millisecond)
	h.Client(t, 200, 20*time.Millisecond)
	counted := testenv.StartCommandCounter(t, h.Socket)
	ctx := testenv.Context(t, 30*time.Second)
	got, err := New(kernelConfig(t, counted.Socket, "    fast_signal: sessions\n"), Options{}).RunOnce(ctx, false)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.NotNil(t, got[0].Signal)
	assert.Equal(t, fastsignal.ReaderSessions, got[0].Signal.Reader)
	for _, s := range got[0].Plan.Servers {
		assert.Contains(t, s.Reason, "; reader sessions", "server %s", s.Server)
	}
	assert.Positive(t, counted.Count("show sess"), "show sess all was not read")
}
