package daemon

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
)

// healthzOK reports whether the daemon's /healthz on port answers 200.
func healthzOK(port int) bool {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", port))
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// failingAcceptListener fails its first Accept with an error net/http does
// not retry (as a listener whose fd broke), then accepts as its listener does.
type failingAcceptListener struct {
	net.Listener
	failed atomic.Bool
}

func (l *failingAcceptListener) Accept() (net.Conn, error) {
	if !l.failed.Swap(true) {
		return nil, errors.New("accept: injected fault")
	}
	return l.Listener.Accept()
}

// A listener that stops after the start (here an accept error) leaves the
// daemon weighting with no /metrics, /healthz or /readyz: it is said at
// ERROR once with its cause, and the daemon listens again on the same address.
func TestWebListenerThatStopsIsRetried(t *testing.T) {
	port := testenv.FreePort(t)
	cfg := testConfig(t, "be")
	cfg.Listen = fmt.Sprintf("127.0.0.1:%d", port)
	var logs testenv.SyncBuffer
	n := &recordingNotifier{ready: make(chan struct{})}
	d := New(cfg, Options{Log: slog.New(slog.NewTextHandler(&logs, nil)), Notifier: n})
	d.webRetry = 10 * time.Millisecond
	var listens atomic.Int32
	d.listen = func(network, addr string) (net.Listener, error) {
		ln, err := net.Listen(network, addr)
		if err != nil || listens.Add(1) > 1 {
			return ln, err
		}
		return &failingAcceptListener{Listener: ln}, nil
	}
	r := startDaemon(t, d, n)
	testenv.WaitFor(t, "/healthz answering again", func() bool { return healthzOK(port) })
	require.NoError(t, r.stop())
	out := logs.String()
	assert.Equal(t, 1, strings.Count(out, `level=ERROR msg="http server stopped`), out)
	assert.Contains(t, out, "injected fault", "the cause is logged")
	assert.Contains(t, out, `level=INFO msg="serving metrics again"`)
	assert.Equal(t, int32(2), listens.Load(), "one listen at start, one retry")
}

// exporter-toolkit reads the web configuration file again when it starts
// serving: one that breaks between the start check and that read (a
// certificate being rotated) made it return at once, leaving the port bound
// and never accepted. The daemon closes it, says so at ERROR once, retries
// quietly while the file stays broken and serves again once it is fixed.
func TestWebConfigBrokenAtServeIsRetried(t *testing.T) {
	cfg, web, port, logs, n := webConfigSetup(t)
	d := New(cfg, Options{Log: slog.New(slog.NewTextHandler(logs, nil)), Notifier: n})
	d.webRetry = 10 * time.Millisecond
	var listens atomic.Int32
	fixed := make(chan struct{})
	d.listen = func(network, addr string) (net.Listener, error) {
		switch listens.Add(1) {
		case 1: // after the start check, before the listener reads the file
			// yaml's unmarshal errors take several lines.
			require.NoError(t, os.WriteFile(web, []byte("basic_auth_users: {alice: [x]}\n"), 0o600))
		case 4: // a few quiet retries later
			require.NoError(t, os.WriteFile(web, []byte("basic_auth_users: {}\n"), 0o600))
			close(fixed)
		}
		return net.Listen(network, addr)
	}
	r := startDaemon(t, d, n)
	select {
	case <-fixed:
	case <-time.After(10 * time.Second):
		t.Fatal("the listener was not opened again while the file was broken")
	}
	testenv.WaitFor(t, "/healthz answering again", func() bool { return healthzOK(port) })
	require.NoError(t, r.stop())
	out := logs.String()
	assert.Equal(t, 1, strings.Count(out, `level=ERROR msg="http server stopped`), out)
	assert.Contains(t, out, "web.yml", "the cause names the file")
	assert.Contains(t, out, `level=INFO msg="serving metrics again"`)
	n.mu.Lock()
	defer n.mu.Unlock()
	assert.Contains(t, strings.Join(n.states, "\n"), "STATUS=HTTP endpoints down", "systemctl status shows it")
	for _, s := range n.states {
		assert.NotContains(t, s, "\n", "a newline would start another sd_notify assignment")
	}
}
