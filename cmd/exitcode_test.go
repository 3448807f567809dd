package cmd

import (
	"bytes"
	"strings"
	"testing"
)

// A wrong command line exited 1, like a failed run, so a script or systemd
// (RestartPreventExitStatus) could not tell "called wrongly" from "HAProxy was down".
func TestUsageErrorsExit2(t *testing.T) {
	tests := []struct {
		args []string
		code int
		hint string // in stderr
	}{
		{[]string{"calc", "--bogus", "--", "1"}, 2, "Run 'haproxy-weighter calc --help' for usage."},
		{[]string{"calc"}, 2, "Run 'haproxy-weighter calc --help' for usage."},
		{[]string{"nosuch"}, 2, "Run 'haproxy-weighter --help' for usage."},
		{[]string{"once", "extra-arg"}, 2, "Run 'haproxy-weighter once --help' for usage."},
		{[]string{"run"}, 2, "Run 'haproxy-weighter run --help' for usage."},
		{[]string{"once", "-o", "yaml"}, 2, "Run 'haproxy-weighter once --help' for usage."},
		{[]string{"calc", "--log-level", "loud", "--", "1"}, 2, "Run 'haproxy-weighter calc --help' for usage."},
		{[]string{"once", "-o", "table", "--log-level", "info", "--log-format", "xml"}, 2, "Run 'haproxy-weighter once --help' for usage."},
		{[]string{"calc", "--", "x"}, 1, ""},                      // a bad value, not a bad command line
		{[]string{"validate", "/nonexistent/config.yaml"}, 1, ""}, // a failure
		{[]string{"calc", "--", "1"}, 0, ""},
		{[]string{"validate", "a.yml", "--config", "b.yml"}, 2, "for usage."},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := executeArgs(tt.args, &out, &errb); code != tt.code {
				t.Errorf("exit %d, want %d (stderr %q)", code, tt.code, errb.String())
			}
			if tt.hint != "" && !strings.Contains(errb.String(), tt.hint) {
				t.Errorf("stderr %q lacks %q", errb.String(), tt.hint)
			}
		})
	}
}
