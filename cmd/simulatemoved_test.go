package cmd

import (
	"bytes"
	"io"
	"testing"
)

// `haproxy-weighter simulate` moved to haproxy-weighter-sim: the old command line
// exits 2 (a wrong command line, not a failed run) and says what to run instead,
// with the same arguments, whatever they are.
func TestSimulateMoved(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"simulate"}, "haproxy-weighter-sim"},
		{[]string{"simulate", "-o", "json", "--scenario", "examples/scenarios/sigma-1.0.yaml", "--seed", "2"},
			"haproxy-weighter-sim -o json --scenario examples/scenarios/sigma-1.0.yaml --seed 2"},
		{[]string{"simulate", "--help"}, "haproxy-weighter-sim --help"},
		{[]string{"simulate", "--plot", "my load.svg", "--sweep"}, "haproxy-weighter-sim --plot 'my load.svg' --sweep"},
		{[]string{"simulate", "--scenario", "it's.yaml"}, `haproxy-weighter-sim --scenario 'it'\''s.yaml'`},
	}
	for _, tt := range tests {
		var out, errb bytes.Buffer
		code := executeArgs(tt.args, &out, &errb)
		if code != 2 {
			t.Errorf("%q: exit %d, want 2", tt.args, code)
		}
		want := "error: simulate moved to its own command; run: " + tt.want + "\nRun 'haproxy-weighter-sim --help' for usage.\n"
		if errb.String() != want || out.Len() != 0 {
			t.Errorf("%q: stdout %q, stderr\n%s\nwant\n%s", tt.args, out.String(), errb.String(), want)
		}
	}
	// The daemon's help does not offer it.
	var out bytes.Buffer
	if code := executeArgs([]string{"--help"}, &out, io.Discard); code != 0 || bytes.Contains(out.Bytes(), []byte("simulate")) {
		t.Errorf("help (exit %d) lists simulate:\n%s", code, out.String())
	}
}
