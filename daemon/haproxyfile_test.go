package daemon

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/config"
	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
)

// logLine is one line of the daemon's JSON log.
type logLine struct {
	Level   string `json:"level"`
	Msg     string `json:"msg"`
	Backend string `json:"backend"`
	Err     string `json:"err"`
}

func logLines(t *testing.T, buf *testenv.SyncBuffer) []logLine {
	t.Helper()
	var out []logLine
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var ll logLine
		require.NoError(t, json.Unmarshal([]byte(l), &ll), l)
		out = append(out, ll)
	}
	return out
}

// run reads the HAProxy configuration that haproxy.config_file names before
// any cycle and logs each of its warnings once at WARN, in the words
// validate prints; a reload of the daemon's configuration does not repeat
// them.
func TestRunWarnsOnceAboutTheHAProxyConfigurationBeforeAnyCycle(t *testing.T) {
	h := testenv.StartHAProxy(t, testenv.HAProxyDefaults+fmt.Sprintf(`
frontend fe
  bind 127.0.0.1:%d
  default_backend be
backend be
  balance roundrobin
  server s1 127.0.0.1:%d weight 10
  server s2 127.0.0.1:%d weight 10
`, testenv.FreePort(t), testenv.FreePort(t), testenv.FreePort(t)))
	yml := "listen: \"\"\ninterval: 1h\nhaproxy: {socket: " + h.Socket + ", config_file: " + h.Config + "}\n" +
		"backends:\n  - name: be\n    fast_signal: \"off\"\n    source: {haproxy: {counter: bytes_in}}\n"
	cfg, err := config.Parse("test.yml", []byte(yml), nil)
	require.NoError(t, err)
	warnings, err := cfg.HAProxyFileWarnings()
	require.NoError(t, err)
	var want []string
	for _, w := range warnings {
		want = append(want, w.String())
	}
	// This HAProxy lacks option contstats and a server state file; its socket is admin.
	require.Len(t, want, 2, "%q", want)
	assert.Contains(t, want[0], "option contstats")
	assert.Contains(t, want[1], "load-server-state-from-file")
	for _, w := range want {
		// In the form of the deprecated keys' warnings (and gcc's, go vet's).
		assert.Regexp(t, "^"+regexp.QuoteMeta(h.Config)+`:\d+: warning: backend be: `, w)
	}

	buf := &testenv.SyncBuffer{}
	log := slog.New(slog.NewJSONHandler(buf, nil))
	n := &recordingNotifier{ready: make(chan struct{})}
	d := New(cfg, Options{Log: log, Notifier: n, Reload: func() (*config.Config, error) { return config.Parse("test.yml", []byte(yml), nil) }})
	r := startDaemon(t, d, n)
	r.hup <- os.Interrupt
	waitFor(t, "the reload", func() bool { return strings.Contains(buf.String(), "config reloaded") })
	require.NoError(t, r.stop())

	lines := logLines(t, buf)
	firstCycle := slices.IndexFunc(lines, func(l logLine) bool { return l.Msg == "current weights" })
	require.GreaterOrEqual(t, firstCycle, 0, "the start-up read was not logged:\n%s", buf)
	for _, w := range want {
		var at []int
		for i, l := range lines {
			if l.Msg == w {
				at = append(at, i)
				assert.Equal(t, "WARN", l.Level, w)
			}
		}
		require.Len(t, at, 1, "%q logged %d times:\n%s", w, len(at), buf)
		assert.Less(t, at[0], firstCycle, "%q logged after the start-up read", w)
	}
}

// A file that cannot be read does not stop the weighting: run says so at
// WARN and goes on.
func TestRunGoesOnWithoutAReadableHAProxyConfiguration(t *testing.T) {
	h := testenv.StartHAProxy(t, testenv.HAProxyDefaults+fmt.Sprintf("backend be\n  server s1 127.0.0.1:%d\n", testenv.FreePort(t)))
	missing := filepath.Join(t.TempDir(), "haproxy.cfg")
	yml := "listen: \"\"\ninterval: 1h\nhaproxy: {socket: " + h.Socket + ", config_file: " + missing + "}\n" +
		"backends:\n  - name: be\n    source: {haproxy: {counter: current_sessions}}\n"
	cfg, err := config.Parse("test.yml", []byte(yml), nil)
	require.NoError(t, err)
	buf := &testenv.SyncBuffer{}
	n := &recordingNotifier{ready: make(chan struct{})}
	d := New(cfg, Options{Log: slog.New(slog.NewJSONHandler(buf, nil)), Notifier: n})
	r := startDaemon(t, d, n)
	require.NoError(t, r.stop())
	lines := logLines(t, buf)
	i := slices.IndexFunc(lines, func(l logLine) bool { return l.Msg == "haproxy.config_file not checked; weighting goes on" })
	require.GreaterOrEqual(t, i, 0, "no warning about the missing file:\n%s", buf)
	assert.Equal(t, "WARN", lines[i].Level)
	assert.Contains(t, lines[i].Err, missing)
	assert.True(t, slices.ContainsFunc(lines, func(l logLine) bool { return l.Msg == "current weights" && l.Backend == "be" }),
		"the backend was not read after the warning:\n%s", buf)
}
