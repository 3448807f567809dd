package cmd

import (
	"bytes"
	"strings"
	"testing"
)

// A value out of range on the command line exited 1, like a failed run, and
// in flags-only mode was reported against the YAML generated from the flags
// ("flags:2: backends[0] (b): limiting_factor must be > 1"). It is a usage
// error (exit 2) that names the flag.
func TestFlagRangeErrorsAreUsageErrors(t *testing.T) {
	hc := []string{"--backend", "b", "--haproxy-counter", "bytes_in"}
	cfg := []string{"--config", "../examples/config/haproxy-stats.yaml"}
	with := func(command string, base []string, args ...string) []string {
		return append(append([]string{command}, base...), args...)
	}
	tests := []struct {
		args []string
		want string // the error line
	}{
		{with("once", hc, "--limiting-factor", "0.5"), "--limiting-factor must be > 1, got 0.5"},
		{with("run", hc, "--aggressiveness", "-1"), "--aggressiveness must be > 0, got -1"},
		{with("once", hc, "--function", "nope"), `--function "nope" is unknown, valid: feedback, limited-proportions, normalised-exponential`},
		{with("once", hc, "--interval", "1ms"), "--interval: must be at least 100ms, got 1ms"},
		{with("run", hc, "--fast-signal", "maybe"), `--fast-signal: want on, off, or one reader pinned: kernel, sessions or stat; got "maybe"`},
		{with("once", cfg, "--fast-signal", "off"), "--config and backend flags (--backend, --socket, --query, ...) cannot be mixed"},
		{with("once", hc, "--interval", "0s"), "--interval: must be positive, got 0s"},
		{with("run", hc, "--listen", "localhost"), `--listen: "localhost" is not host:port (address localhost: missing port in address)`},
		{[]string{"once", "--backend", "be 1", "--haproxy-counter", "bytes_in"}, `--backend: character ' ' is not allowed in HAProxy names (letters, digits, '.', ':', '_', '-')`},
		{[]string{"once", "--backend", "b", "--haproxy-counter", "bogus"}, `--haproxy-counter: unknown counter "bogus" (want bytes_in, bytes_out, sessions_total or current_sessions)`},
		{[]string{"once", "--backend", "b", "--prometheus-url", "ftp://x", "--query", "up"}, "--prometheus-url: must be an absolute http or https URL"},
		{[]string{"once", "--backend", "b", "--graphite-url", "http://127.0.0.1:8080"}, "--target: must be set"},
		{[]string{"once", "--backend", "b", "--socket", "/tmp/x.sock"}, "no load source: give --prometheus-url, --graphite-url or --haproxy-counter"},
		{with("once", cfg, "--interval", "1ms"), "--interval: must be at least 100ms, got 1ms"},
		{with("run", cfg, "--listen", "localhost"), `--listen: "localhost" is not host:port (address localhost: missing port in address)`},
		{[]string{"calc", "--limiting-factor", "0.5", "--", "1", "2"}, "--limiting-factor must be > 1, got 0.5"},
		{[]string{"calc", "--max-weight", "0", "--", "1", "2"}, "--max-weight must be in 1..256, got 0"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var out, errb bytes.Buffer
			code := executeArgs(tt.args, &out, &errb)
			if code != 2 {
				t.Errorf("exit %d, want 2", code)
			}
			want := "error: " + tt.want + "\nRun 'haproxy-weighter " + tt.args[0] + " --help' for usage.\n"
			if errb.String() != want {
				t.Errorf("stderr\n%s\nwant\n%s", errb.String(), want)
			}
		})
	}
}
