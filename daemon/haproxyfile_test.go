package daemon

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
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
	Warning string `json:"warning"` // a finding in HAProxy's configuration file
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
	testenv.WaitFor(t, "the reload", func() bool { return strings.Contains(buf.String(), "config reloaded") })
	require.NoError(t, r.stop())

	lines := logLines(t, buf)
	firstCycle := slices.IndexFunc(lines, func(l logLine) bool { return l.Msg == "current weights" })
	require.GreaterOrEqual(t, firstCycle, 0, "the start-up read was not logged:\n%s", buf)
	for _, w := range want {
		var at []int
		for i, l := range lines {
			if l.Msg == "haproxy config warning" && l.Warning == w {
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
	i := slices.IndexFunc(lines, func(l logLine) bool { return l.Msg == "haproxy.config_file not checked" })
	require.GreaterOrEqual(t, i, 0, "no warning about the missing file:\n%s", buf)
	assert.Equal(t, "WARN", lines[i].Level)
	assert.Contains(t, lines[i].Err, missing)
	assert.True(t, slices.ContainsFunc(lines, func(l logLine) bool { return l.Msg == "current weights" && l.Backend == "be" }),
		"the backend was not read after the warning:\n%s", buf)
}

// At each reload of the daemon's configuration, run reads HAProxy's
// configuration file again and logs at WARN each warning the last check
// did not have (a fixed one that comes back included), and nothing when
// the warnings are those of the last check. A file that became unreadable is
// one WARN naming it, and the reload goes through; when it is readable again
// with the warnings it had, nothing is logged.
func TestRunChecksTheHAProxyConfigurationAgainAtEachReload(t *testing.T) {
	h := testenv.StartHAProxy(t, testenv.HAProxyDefaults+fmt.Sprintf(`
frontend fe
  bind 127.0.0.1:%d
  default_backend be
backend be
  balance roundrobin
  server s1 127.0.0.1:%d weight 10
`, testenv.FreePort(t), testenv.FreePort(t)))
	running, err := os.ReadFile(h.Config)
	require.NoError(t, err)
	fixed := string(running)
	// balance first on the same line: the other warnings keep their lines.
	broken := strings.Replace(fixed, "balance roundrobin", "balance first", 1)
	require.NotEqual(t, fixed, broken)
	path := filepath.Join(t.TempDir(), "haproxy.cfg")
	write := func(text string) {
		t.Helper()
		require.NoError(t, os.WriteFile(path, []byte(text), 0o600))
		out, err := exec.Command("haproxy", "-c", "-f", path).CombinedOutput()
		require.NoError(t, err, "haproxy -c -f %s:\n%s", path, out)
	}
	write(fixed)

	yml := "listen: \"\"\ninterval: 1h\nhaproxy: {socket: " + h.Socket + ", config_file: " + path + "}\n" +
		"backends:\n  - name: be\n    fast_signal: \"off\"\n    source: {haproxy: {counter: bytes_in}}\n"
	load := func() (*config.Config, error) { return config.Parse("test.yml", []byte(yml), nil) }
	cfg, err := load()
	require.NoError(t, err)
	buf := &testenv.SyncBuffer{}
	n := &recordingNotifier{ready: make(chan struct{})}
	d := New(cfg, Options{Log: slog.New(slog.NewJSONHandler(buf, nil)), Notifier: n, Reload: load})
	r := startDaemon(t, d, n)

	// warned is what the daemon logged about the file since the last call.
	seen, reloads := 0, 0
	warned := func() []logLine {
		t.Helper()
		lines := logLines(t, buf)
		var out []logLine
		for _, l := range lines[seen:] {
			assert.NotEqual(t, "config reload rejected", l.Msg)
			if strings.Contains(l.Warning, path) || strings.Contains(l.Err, path) {
				assert.Equal(t, "WARN", l.Level, l.Msg)
				out = append(out, l)
			}
		}
		seen = len(lines)
		return out
	}
	msgs := func(lines []logLine) []string {
		var out []string
		for _, l := range lines {
			if l.Warning != "" {
				assert.Equal(t, "haproxy config warning", l.Msg)
				out = append(out, l.Warning)
				continue
			}
			out = append(out, l.Msg)
		}
		return out
	}
	reload := func() []logLine {
		t.Helper()
		reloads++
		r.hup <- syscall.SIGHUP
		testenv.WaitFor(t, "the reload", func() bool { return strings.Count(buf.String(), `"msg":"config reloaded"`) == reloads })
		return warned()
	}

	atStart := msgs(warned())
	require.Len(t, atStart, 2, "no option contstats, no server state file: %q", atStart)
	assert.Empty(t, reload(), "a reload with the file unchanged")

	write(broken)
	balanceFirst := fmt.Sprintf("%s:%d: warning: backend be: balance first ignores server weights; use roundrobin or leastconn",
		path, 1+strings.Count(broken[:strings.Index(broken, "balance first")], "\n"))
	assert.Equal(t, []string{balanceFirst}, msgs(reload()), "the new warning, alone")
	assert.Empty(t, reload(), "a reload with the same warnings")

	write(fixed)
	assert.Empty(t, reload(), "a warning gone")
	write(broken)
	assert.Equal(t, []string{balanceFirst}, msgs(reload()), "the warning back")

	require.NoError(t, os.Remove(path))
	unreadable := reload()
	require.Len(t, unreadable, 1, "%q", msgs(unreadable))
	assert.Equal(t, "haproxy.config_file not checked", unreadable[0].Msg)
	assert.Contains(t, unreadable[0].Err, path)
	assert.Empty(t, reload(), "still unreadable")

	write(broken)
	assert.Empty(t, reload(), "readable again, with the warnings it had")
	require.NoError(t, r.stop())
}
