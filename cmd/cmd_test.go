package cmd

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// execute runs a fresh command tree on args and returns stdout, stderr and the error.
func execute(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	root := NewRoot(&out, &errb)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), errb.String(), err
}

func TestCalc(t *testing.T) {
	tests := []struct {
		args []string
		want string // first output line, or the error
	}{
		// The README example; hand-checked: mean 17.5, floor 4.4 lifts the 0,
		// weights ∝ 1/load with the lightest (the lifted 0) at 256.
		{[]string{"--function", "limited-proportions", "--limiting-factor", "4", "--aggressiveness", "1", "--", "10", "20", "40", "0"}, "112 56 28 256"},
		{[]string{"--", "10", "20", "40", "80"}, "256 128 64 32"},
		{[]string{"--", "5", "5"}, "256 256"},
		{[]string{"--", "1", "NaN"}, `load 2 ("NaN") must be a finite number`},
		{[]string{"--", "1e400", "1"}, `load 1 ("1e400") must be a finite number`}, // was "is not a number"
		{[]string{"--", "1", "-3"}, `load 2 ("-3") must not be negative`},
		{[]string{"--", "x"}, `load 1 ("x") is not a number`},
		{[]string{"--function", "nope", "--", "1"}, `--function "nope" is unknown, valid: feedback, limited-proportions, normalised-exponential`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			out, _, err := execute(t, append([]string{"calc"}, tt.args...)...)
			got := strings.SplitN(out, "\n", 2)[0]
			if err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
	// Flags are package state in cobra: put the defaults back for other tests.
	execute(t, "calc", "--function", "limited-proportions", "--limiting-factor", "4", "--aggressiveness", "1", "--", "1")
}

func TestValidateExamples(t *testing.T) {
	t.Setenv("HG_API_KEY", "test-key")
	files, err := filepath.Glob("../examples/config/*.yaml")
	if err != nil || len(files) < 3 {
		t.Fatalf("examples: %v %v", files, err)
	}
	for _, f := range files {
		out, _, err := execute(t, "validate", f)
		if err != nil || !strings.Contains(out, ": ok (") {
			t.Errorf("%s: %v %s", f, err, out)
		}
	}
	// The packaged config's comment says `validate --config FILE`: both forms work.
	out, _, err := execute(t, "validate", "--config", files[0])
	if err != nil || !strings.Contains(out, ": ok (") {
		t.Errorf("--config %s: %v %s", files[0], err, out)
	}
}

func TestValidateSaysWhere(t *testing.T) {
	_, _, err := execute(t, "validate", "../config/testdata/bad-unknown-key.yml")
	want := "invalid configuration:\n../config/testdata/bad-unknown-key.yml:6: unknown key \"limiting_factr\""
	if err == nil || err.Error() != want {
		t.Errorf("got %v, want %q", err, want)
	}
}

func TestConfigAndBackendFlagsDoNotMix(t *testing.T) {
	_, _, err := execute(t, "once", "--config", "../examples/config/haproxy-stats.yaml", "--backend", "be_x")
	want := "--config and backend flags (--backend, --socket, --query, ...) cannot be mixed"
	if err == nil || err.Error() != want {
		t.Errorf("got %v, want %q", err, want)
	}
}
