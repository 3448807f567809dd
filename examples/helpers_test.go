package examples

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// testVersion is stamped into the binary these tests build, so `version` can be checked.
const testVersion = "ops-test"

// versionLDFlags are the Dockerfile's and Makefile's link flags.
const versionLDFlags = "-s -w -X github.com/haproxy-weighter/haproxy-weighter/cmd.Version=" + testVersion

var (
	tmpRoot   string // removed after all tests
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "haproxy-weighter-ops-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	tmpRoot = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// repoRoot is the module root (tests run in examples/).
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// goTool finds the go command that runs these tests.
func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}

// weighterBinary builds cmd/haproxy-weighter once per test run exactly as the Dockerfile
// does: static (CGO_ENABLED=0), -trimpath, version stamped.
func weighterBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		builtBin = filepath.Join(tmpRoot, "haproxy-weighter")
		buildErr = goBuild(builtBin, "./cmd/haproxy-weighter", "-trimpath", "-ldflags", versionLDFlags)
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBin
}

// goBuild builds pkg (relative to the module root) into out, statically.
func goBuild(out, pkg string, flags ...string) error {
	args := append([]string{"build", "-o", out}, flags...)
	cmd := exec.Command(goTool(), append(args, pkg)...)
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	return nil
}

// requireTool returns the path of a system tool, or fails the test saying how to install it.
func requireTool(t *testing.T, name, install string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, dir := range []string{"/usr/sbin", "/sbin", "/usr/bin"} {
		if p := filepath.Join(dir, name); isExecutable(p) {
			return p
		}
	}
	t.Fatalf("%s not found: install it with `%s`", name, install)
	return ""
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// run runs a command with a timeout and returns its combined output; it fails the test
// if the command fails.
func run(t *testing.T, timeout time.Duration, name string, args ...string) string {
	t.Helper()
	out, err := runErr(timeout, name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return out
}

func runErr(timeout time.Duration, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var buf bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err := cmd.Run()
	return buf.String(), err
}

// processesMentioning lists running processes (pid and command line) whose command line
// contains s — used to prove that nothing a test or the demo started is left behind.
func processesMentioning(s string) []string {
	var found []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(b) == 0 {
			continue // gone, or a zombie/kernel thread
		}
		if cl := strings.ReplaceAll(string(b), "\x00", " "); strings.Contains(cl, s) {
			found = append(found, fmt.Sprintf("%d %s", pid, cl))
		}
	}
	return found
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func count(list []string, s string) int {
	n := 0
	for _, v := range list {
		if v == s {
			n++
		}
	}
	return n
}

func index(list []string, s string) int { return slices.Index(list, s) }
