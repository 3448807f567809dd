package cmd

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// loadFlags parses args on a fresh command with the run/once config flags and loads them.
func loadFlags(t *testing.T, args ...string) error {
	t.Helper()
	c := &cobra.Command{Use: "x"}
	cf := addConfigFlags(c, true)
	if err := c.ParseFlags(args); err != nil {
		t.Fatal(err)
	}
	_, err := cf.load()
	return err
}

// --interval 0s without --config used to be taken as "not given": the daemon
// ran every 10s instead of refusing the value.
func TestIntervalZeroFlagRejected(t *testing.T) {
	for _, args := range [][]string{
		{"--backend", "b", "--haproxy-counter", "bytes_in", "--interval", "0s"},
		{"--config", "../examples/config/haproxy-stats.yaml", "--interval", "0s"},
	} {
		err := loadFlags(t, args...)
		if err == nil || !strings.Contains(err.Error(), "--interval: must be positive, got 0s") {
			t.Errorf("%v: got %v", args, err)
		}
	}
	if err := loadFlags(t, "--backend", "b", "--haproxy-counter", "bytes_in", "--interval", "3s"); err != nil {
		t.Errorf("--interval 3s: %v", err)
	}
}
