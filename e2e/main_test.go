package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// binary is the haproxy-weighter built once for all tests.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "hw-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "haproxy-weighter")
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	// The tags `make build` ships with (the Makefile's TAGS): the binary tested is the one shipped.
	build := exec.Command(gobin, "build", "-tags", "nethttpomithttp2", "-o", binary, "../cmd/haproxy-weighter")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: build haproxy-weighter:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
