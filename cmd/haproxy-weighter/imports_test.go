package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The daemon runs on every balancer: it must not link the simulator (sim/) and
// the plotting libraries it brings (gonum.org/v1/plot with its fonts, LaTeX and
// PDF packages, 76 packages in all), which made the static binary 24.0 MB
// instead of 16.7 MB.
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
		if simulatorOnly(p) {
			t.Errorf("the daemon imports %s", p)
		}
		// client-native is for tests and benchmarks: it adds 2 MB of generated
		// models and validation to a binary that runs on every balancer. Its
		// configuration parser's line tokenizer (4 KB) reads HAProxy's
		// configuration (haproxycfg); the parser itself would add 1.9 MB.
		if strings.HasPrefix(p, "github.com/haproxytech/client-native/") && p != clientNativeTokenizer {
			t.Errorf("the daemon imports %s", p)
		}
	}
}

// clientNativeTokenizer is the one client-native package the daemon links.
const clientNativeTokenizer = "github.com/haproxytech/client-native/v5/config-parser/common"

// simulatorOnly reports whether a package belongs to the simulator or to the
// plotting it brings: gonum/plot, its fonts, LaTeX, PDF, SVG and image packages.
func simulatorOnly(pkg string) bool {
	for _, prefix := range []string{
		"github.com/haproxy-weighter/haproxy-weighter/sim",
		"gonum.org/", "codeberg.org/go-fonts/", "codeberg.org/go-latex/", "codeberg.org/go-pdf/",
		"github.com/ajstarks/svgo", "git.sr.ht/~sbinet/gg", "golang.org/x/image/",
	} {
		if pkg == strings.TrimSuffix(prefix, "/") || strings.HasPrefix(pkg, strings.TrimSuffix(prefix, "/")+"/") {
			return true
		}
	}
	return false
}

func TestSimulatorOnly(t *testing.T) {
	for _, p := range []string{"github.com/haproxy-weighter/haproxy-weighter/sim", "gonum.org/v1/plot/vg/vgpdf",
		"codeberg.org/go-latex/latex", "golang.org/x/image/font"} {
		if !simulatorOnly(p) {
			t.Errorf("%s is not recognised as the simulator's", p)
		}
	}
	for _, p := range []string{"github.com/haproxy-weighter/haproxy-weighter/sources", "github.com/haproxy-weighter/haproxy-weighter/simx",
		"golang.org/x/sys/unix", "image"} {
		if simulatorOnly(p) {
			t.Errorf("%s is taken for the simulator's", p)
		}
	}
}
