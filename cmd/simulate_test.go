package cmd

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/sim"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

func runRoot(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	rootCmd.SetOut(&out)
	t.Cleanup(func() { rootCmd.SetOut(os.Stdout); rootCmd.SetArgs(nil) })
	rootCmd.SetArgs(args)
	err := rootCmd.Execute()
	return out.String(), err
}

func TestSimulateJSONMarksTheDefault(t *testing.T) {
	plot := filepath.Join(t.TempDir(), "load.svg")
	out, err := runRoot(t, "simulate", "--duration", "8m", "--output", "json", "--plot", plot)
	require.NoError(t, err)
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
	for _, s := range rep.Strategies {
		if s.Default {
			defaults = append(defaults, s.Strategy)
		}
		assert.GreaterOrEqual(t, s.P50, 1.0, s.Strategy)
	}
	assert.Equal(t, []string{sim.PolicyLabel(weighter.DefaultPolicy())}, defaults)
	info, err := os.Stat(plot)
	require.NoError(t, err)
	assert.Positive(t, info.Size())

	_, err = runRoot(t, "simulate", "--duration", "8m", "--output", "yaml")
	assert.ErrorContains(t, err, `unknown --output "yaml"`)
	assert.ErrorAs(t, err, new(usageError), "a wrong flag value is a usage error (exit 2)")
}

// --scenario was read without a bound: --scenario /dev/zero ate the memory.
func TestSimulateScenarioBounded(t *testing.T) {
	_, err := runRoot(t, "simulate", "-o", "table", "--scenario", "/dev/zero")
	assert.ErrorContains(t, err, "read scenario: /dev/zero: not a regular file: a character device")
	c, _, err := rootCmd.Find([]string{"simulate"})
	require.NoError(t, err)
	require.NoError(t, c.Flags().Set("scenario", "")) // cobra keeps flag values between runs
}
