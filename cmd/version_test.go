package cmd

import (
	"bytes"
	"os"
	"runtime"
	"testing"

	"github.com/prometheus/common/version"
	"github.com/spf13/pflag"
)

// TestVersionFlag: `--version` on the root command prints what the version
// command prints (it used to be refused as an unknown flag), and the version
// reaches prometheus/common/version, which labels the build_info metric.
func TestVersionFlag(t *testing.T) {
	// cobra keeps flag values between runs: another test's --help would win.
	reset := func() {
		rootCmd.Flags().VisitAll(func(f *pflag.Flag) {
			_ = f.Value.Set(f.DefValue)
			f.Changed = false
		})
	}
	reset()
	t.Cleanup(reset)
	run := func(args ...string) (string, int) {
		reset()
		var out bytes.Buffer
		rootCmd.SetOut(&out)
		rootCmd.SetErr(&out)
		rootCmd.SetArgs(args)
		t.Cleanup(func() {
			rootCmd.SetOut(os.Stdout)
			rootCmd.SetErr(os.Stderr)
			rootCmd.SetArgs(nil)
		})
		code := Execute()
		return out.String(), code
	}
	flag, code := run("--version")
	if code != 0 {
		t.Fatalf("--version exited %d: %s", code, flag)
	}
	cmd, code := run("version")
	if code != 0 {
		t.Fatalf("version exited %d: %s", code, cmd)
	}
	want := "haproxy-weighter " + Version + " (" + runtime.Version() + ")\n"
	if flag != want || cmd != want {
		t.Errorf("--version %q, version %q, want %q", flag, cmd, want)
	}
	if version.Version != Version {
		t.Errorf("prometheus/common/version.Version = %q, want %q", version.Version, Version)
	}
}
