package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/sim"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// run executes a fresh command line and returns stdout, stderr and the exit code.
func run(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := execute(newRootCmd(&out, &errb), args)
	return out.String(), errb.String(), code
}

func TestSimulateJSONMarksTheDefault(t *testing.T) {
	plot := filepath.Join(t.TempDir(), "load.svg")
	out, stderr, code := run(t, "--duration", "8m", "--output", "json", "--plot", plot)
	require.Equal(t, 0, code, stderr)
	var rep struct {
		Scenario   map[string]any `json:"scenario"`
		Strategies []struct {
			Strategy string   `json:"strategy"`
			Default  bool     `json:"default"`
			P50      float64  `json:"p50_max_mean"`
			Gap      *float64 `json:"gap_closed_p50"`
		} `json:"strategies"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	assert.Equal(t, "8m0s", rep.Scenario["duration"])
	var defaults []string
	names := func(rows []struct {
		Strategy string   `json:"strategy"`
		Default  bool     `json:"default"`
		P50      float64  `json:"p50_max_mean"`
		Gap      *float64 `json:"gap_closed_p50"`
	}) []string {
		var out []string
		for _, r := range rows {
			out = append(out, r.Strategy)
		}
		return out
	}
	for _, s := range rep.Strategies {
		if s.Default {
			defaults = append(defaults, s.Strategy)
		}
		assert.GreaterOrEqual(t, s.P50, 1.0, s.Strategy)
	}
	// The row starred is the daemon as it ships (fast signal × calibration),
	// not the default policy fed the source alone.
	assert.Equal(t, []string{sim.ShippedName}, defaults)
	assert.Contains(t, names(rep.Strategies), sim.PolicyLabel(weighter.DefaultPolicy()), "the source alone stays a row")
	info, err := os.Stat(plot)
	require.NoError(t, err)
	assert.Positive(t, info.Size())
}

// The same scenario and seed give the same bytes, whatever the run.
func TestSimulateJSONIsReproducible(t *testing.T) {
	args := []string{"-o", "json", "--scenario", "../../examples/scenarios/default.yaml", "--seed", "3", "--duration", "5m"}
	a, stderr, code := run(t, args...)
	require.Equal(t, 0, code, stderr)
	b, _, _ := run(t, args...)
	assert.Equal(t, a, b)
}

// A wrong command line exits 2 with a pointer to --help; a simulation that
// cannot run (a scenario that cannot be read) exits 1.
func TestSimulateExitCodes(t *testing.T) {
	tests := []struct {
		args   []string
		code   int
		stderr string // exact, for usage errors; a substring otherwise
	}{
		{[]string{"--output", "yaml"}, 2, `unknown --output "yaml" (want table or json)`},
		{[]string{"--max-step", "0.5"}, 2, "--max-step must be > 1 (or 0 = off), got 0.5"},
		{[]string{"--limiting-factor", "0.5", "--gain", "0"}, 2, "--limiting-factor must be > 1, got 0.5\n--gain must be > 0, got 0"},
		{[]string{"--bogus"}, 2, "unknown flag: --bogus"},
		{[]string{"extra-arg"}, 2, `unknown command "extra-arg" for "haproxy-weighter-sim"`},
		{[]string{"--log-level", "loud"}, 2, `--log-level: slog: level string "loud": unknown name`},
		{[]string{"--log-format", "xml"}, 2, `--log-format: "xml" is not text or json`},
		// --scenario was read without a bound: --scenario /dev/zero ate the memory.
		{[]string{"-o", "table", "--scenario", "/dev/zero"}, 1, "read scenario: /dev/zero: not a regular file: a character device"},
		{[]string{"--scenario", "/nonexistent.yaml"}, 1, "read scenario: "},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			out, stderr, code := run(t, tt.args...)
			assert.Equal(t, tt.code, code, stderr)
			assert.Empty(t, out)
			if tt.code == 2 {
				assert.Equal(t, "error: "+tt.stderr+"\nRun 'haproxy-weighter-sim --help' for usage.\n", stderr)
			} else {
				assert.Contains(t, stderr, "error: "+tt.stderr)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	out, stderr, code := run(t, "--version")
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, "haproxy-weighter-sim dev ("+runtime.Version()+")\n", out)
}

// The help names the tool by its own name.
func TestHelp(t *testing.T) {
	out, _, code := run(t, "--help")
	require.Equal(t, 0, code)
	assert.Contains(t, out, "haproxy-weighter-sim [flags]")
	assert.Contains(t, out, "--sweep")
	assert.NotContains(t, out, "--log-level", "the simulator logs nothing")
}

// TestSimulateTableEndsWithAHint: the table a first run prints is followed, on
// stderr, by one line naming --help and the other runs; JSON is left clean.
func TestSimulateTableEndsWithAHint(t *testing.T) {
	out, stderr, code := run(t, "--duration", "4m")
	require.Equal(t, 0, code, stderr)
	assert.NotEmpty(t, out)
	assert.Equal(t, usageHint+"\n", stderr)
	assert.Contains(t, stderr, "--help")

	_, stderr, code = run(t, "--duration", "4m", "--output", "json")
	require.Equal(t, 0, code, stderr)
	assert.Empty(t, stderr)
}
