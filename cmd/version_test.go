package cmd

import (
	"bytes"
	"runtime"
	"testing"

	"github.com/prometheus/common/version"
)

// TestVersionFlag: `--version` on the root command prints what the version
// command prints (it used to be refused as an unknown flag), and the version
// reaches prometheus/common/version, which labels the build_info metric.
func TestVersionFlag(t *testing.T) {
	run := func(args ...string) (string, int) {
		var out bytes.Buffer
		code := executeArgs(args, &out, &out)
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
