package haproxy

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// TestOperatorLevelSocket: on a socket below level admin HAProxy still shows
// the servers but answers every weight write "Permission denied". Check must
// say so at start, and a batch must fail per server with nothing changed.
func TestOperatorLevelSocket(t *testing.T) {
	oper := filepath.Join(t.TempDir(), "oper.sock")
	h := testenv.StartHAProxy(t, "global\n  stats socket "+oper+" level operator\n"+appConfig(t))
	b := newClient(t, oper).Backend("be_app")
	ctx := testCtx(t)

	err := b.Check(ctx)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Permission denied")
	assert.Contains(t, err.Error(), "admin")

	err = b.SetWeights(ctx, []weighter.Change{{Server: "s1", Weight: 5}, {Server: "s2", Weight: 6}})
	var se *weighter.ServerError
	require.ErrorAs(t, err, &se)
	assert.Contains(t, err.Error(), "server s1")
	assert.Contains(t, err.Error(), "server s2")
	assert.Contains(t, err.Error(), "Permission denied")
	got := byName(t, newClient(t, h.Socket).Backend("be_app"))
	assert.Equal(t, 1, got["s1"].Weight)
	assert.Equal(t, 20, got["s2"].Weight)
}
