package haproxy

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
)

// TestSessionsWithInternalHTTPClientStream: HAProxy's own HTTP client (Lua's
// core.httpclient, 2.8's ocsp-update, 3.x's ACME, the expert `httpclient`
// command used here) runs streams of an internal proxy named "<HTTPCLIENT>",
// which `show sess all` lists like any other. Such a stream open must not
// make the whole dump unreadable: every backend's local signal and session
// shedding would stop for as long as it lasts.
func TestSessionsWithInternalHTTPClientStream(t *testing.T) {
	h, c := startCaptureScenario(t)
	// A discard server never answers: the client's request stays open.
	hanging := testenv.StartDiscardServer(t)
	cli, err := net.DialTimeout("unix", h.Socket, 5*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { cli.Close() })
	_, err = fmt.Fprintf(cli, "expert-mode on; httpclient GET http://%s/\n", hanging)
	require.NoError(t, err)
	testenv.WaitFor(t, "the internal HTTP client's stream", func() bool {
		return strings.Contains(rawDump(t, h.Socket, "show sess all"), "frontend=<HTTPCLIENT>")
	})

	all, err := c.Sessions(testCtx(t))
	require.NoError(t, err)
	var ours []Session
	internal := 0
	for _, s := range all {
		if s.Frontend == "<HTTPCLIENT>" {
			internal++
			assert.Equal(t, "<HTTPCLIENT>", s.Backend, "the internal stream keeps its own backend name")
			continue
		}
		ours = append(ours, s)
	}
	assert.Equal(t, 1, internal, "the internal stream is listed as HAProxy prints it")
	assert.Equal(t, wantCapturedShapes, shapesOf(ours))

	app, err := c.Backend("be_app").Sessions(testCtx(t))
	require.NoError(t, err)
	assert.Equal(t, wantCapturedShapes[:2], shapesOf(app))

	r, err := c.Backend("be_app").ReadLocal(testCtx(t), LocalQuery{Servers: []string{"s1", "s2"}})
	require.NoError(t, err)
	assert.Equal(t, 1, r.OpenAt["s1"])
	assert.Equal(t, 1, r.OpenAt["s2"])
}
