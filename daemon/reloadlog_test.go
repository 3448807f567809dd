package daemon

import (
	"fmt"
	"log/slog"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/config"
	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
)

// A reload that leaves the backends as they were says so in one line: the
// start-up read's lines (the current weights, how the backend is weighted,
// a backend check that was already failing) are not logged again at info
// and above for each backend at each reload, which configuration management
// sends many times a day.
func TestReloadDoesNotRepeatTheStartUpLines(t *testing.T) {
	h := startTwoServers(t)
	yml := fmt.Sprintf("listen: \"\"\ninterval: 1h\nhaproxy: {socket: %s}\nbackends:\n"+
		"  - name: be\n    source: {haproxy: {counter: bytes_in}}\n"+
		"  - name: gone\n    source: {haproxy: {counter: bytes_in}}\n", h.Socket)
	parse := func() (*config.Config, error) { return config.Parse("test.yml", []byte(yml), nil) }
	cfg, err := parse()
	require.NoError(t, err)
	buf := &testenv.SyncBuffer{}
	n := &recordingNotifier{ready: make(chan struct{})}
	d := New(cfg, Options{Log: slog.New(slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Notifier: n, Reload: parse})
	r := startDaemon(t, d, n)
	count := func(msg, backend, level string) int {
		c := 0
		for _, l := range logLines(t, buf) {
			if l.Msg == msg && l.Backend == backend && (level == "" || l.Level == level) {
				c++
			}
		}
		return c
	}
	const check = "backend check failed"
	testenv.WaitFor(t, "gone's first failed cycle", func() bool { return count("cycle failed", "gone", "") == 1 })
	for i := 1; i <= 3; i++ {
		r.hup <- syscall.SIGHUP
		testenv.WaitFor(t, "the reload's start-up reads", func() bool {
			return count("current weights", "be", "") == i+1 && count(check, "gone", "") == i+1
		})
	}
	require.NoError(t, r.stop())
	assert.Equal(t, 1, count("current weights", "be", "INFO"), buf.String())
	assert.Equal(t, 1, count("weighting by the fast signal", "be", "INFO"), buf.String())
	assert.Equal(t, 1, count(check, "gone", "ERROR"), buf.String())
}
