package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The daemon runs on every balancer: it must not link the simulator (sim/) and
// the plotting libraries it brings (gonum.org/v1/plot with its fonts, LaTeX and
// PDF packages), which once made the binary about 24 MB instead of about 12 MB.
// The simulator is cmd/haproxy-weighter-sim.
func TestDaemonDoesNotLinkTheSimulator(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list the daemon's packages: %v", err)
	}
	// As the Makefile builds it: CGO_ENABLED=0 selects the same files.
	cmd := exec.Command(gobin, "list", "-deps", ".")
	cmd.Env = append(cmd.Environ(), "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	pkgs := strings.Fields(string(out))
	if len(pkgs) < 10 {
		t.Fatalf("go list -deps listed only %q", pkgs)
	}
	for _, p := range pkgs {
		if p == "github.com/haproxy-weighter/haproxy-weighter/sim" ||
			strings.HasPrefix(p, "github.com/haproxy-weighter/haproxy-weighter/sim/") ||
			strings.HasPrefix(p, "gonum.org/") {
			t.Errorf("the daemon imports %s", p)
		}
	}
}
