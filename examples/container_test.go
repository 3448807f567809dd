package examples

import (
	"bufio"
	"debug/elf"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestStaticBinaryRunsInEmptyRoot stands in for the Docker build (no engine runs here):
// the binary built as the Dockerfile builds it must be static and run alone in an empty
// root, as root and as the image's non-root user.
func TestStaticBinaryRunsInEmptyRoot(t *testing.T) {
	chroot := requireTool(t, "chroot", "apt-get install coreutils")
	if os.Geteuid() != 0 {
		t.Fatal("chroot needs root (CI runs as root): run the tests as root")
	}
	bin := weighterBinary(t)
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("binary has a dynamic loader (PT_INTERP): not static")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("binary needs shared libraries %v", libs)
	}
	f.Close()

	root := t.TempDir()
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "haproxy-weighter"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(root, 0o755); err != nil { // let uid 65532 in
		t.Fatal(err)
	}
	for _, user := range []string{"0:0", "65532:65532"} {
		out := run(t, time.Minute, chroot, "--userspec="+user, root, "/haproxy-weighter", "version")
		if !strings.HasPrefix(out, "haproxy-weighter "+testVersion+" (go") {
			t.Errorf("as %s: version printed %q", user, out)
		}
		out = run(t, time.Minute, chroot, "--userspec="+user, root, "/haproxy-weighter",
			"calc", "--function", "limited-proportions", "--limiting-factor", "4", "--aggressiveness", "1", "--", "10", "20", "40", "0")
		if first, _, _ := strings.Cut(out, "\n"); first != "112 56 28 256" {
			t.Errorf("as %s: calc printed %q, want first line %q", user, out, "112 56 28 256")
		}
	}
}

// TestDockerfile checks the Dockerfile against what the test above verifies: a static
// build with the same flags, an empty non-root final stage, and the Go version of go.mod.
func TestDockerfile(t *testing.T) {
	text, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var froms []string
	var finalUser, entry string
	sc := bufio.NewScanner(strings.NewReader(string(text)))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		switch fields[0] {
		case "FROM":
			froms = append(froms, strings.Join(fields[1:], " "))
			finalUser = ""
		case "USER":
			finalUser = fields[1]
		case "ENTRYPOINT":
			entry = strings.Join(fields[1:], " ")
		}
	}
	if len(froms) < 2 || froms[len(froms)-1] != "scratch" {
		t.Errorf("want a multi-stage build ending FROM scratch, got %q", froms)
	}
	if finalUser == "" || strings.HasPrefix(finalUser, "0") || strings.HasPrefix(finalUser, "root") {
		t.Errorf("final stage runs as %q, want a non-root USER", finalUser)
	}
	if entry != `["/haproxy-weighter"]` {
		t.Errorf("ENTRYPOINT %s", entry)
	}
	for _, s := range []string{"CGO_ENABLED=0", "-trimpath", "cmd.Version=${VERSION}", "COPY --from=build /out/haproxy-weighter /haproxy-weighter"} {
		if !strings.Contains(string(text), s) {
			t.Errorf("Dockerfile lacks %q", s)
		}
	}
	gomod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindStringSubmatch(string(gomod))
	if m == nil || !strings.HasPrefix(froms[0], "golang:"+m[1]+"-") {
		t.Errorf("build stage %q does not use go.mod's Go %v", froms[0], m)
	}
}
