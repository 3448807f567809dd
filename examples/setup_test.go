package examples

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// ciPackages reads .ci/packages.txt: one Debian package a line, # starts a comment.
func ciPackages(t *testing.T, root string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, ".ci", "packages.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var pkgs []string
	for line := range strings.Lines(string(b)) {
		line, _, _ = strings.Cut(line, "#")
		pkgs = append(pkgs, strings.Fields(line)...)
	}
	return pkgs
}

// readmeAptLine returns the apt-get install command of the README's "The two commands"
// section (continuation lines joined); it fails unless there is exactly one.
func readmeAptLine(t *testing.T, readme string) string {
	t.Helper()
	_, section, ok := strings.Cut(readme, "\n## The two commands\n")
	if !ok {
		t.Fatal(`README.md has no "## The two commands" section`)
	}
	if i := strings.Index(section, "\n## "); i >= 0 {
		section = section[:i]
	}
	section = strings.ReplaceAll(section, "\\\n", " ")
	var found []string
	inCode := false
	for line := range strings.Lines(section) {
		if strings.HasPrefix(line, "```") {
			inCode = !inCode
			continue
		}
		if inCode && strings.Contains(line, "apt-get install") {
			found = append(found, strings.TrimSpace(line))
		}
	}
	if len(found) != 1 {
		t.Fatalf(`README "The two commands" must show exactly one apt-get install command in a code block, found %d: %q`, len(found), found)
	}
	return found[0]
}

var redirection = regexp.MustCompile(`^[0-9&]*[<>]`)

// aptArgs splits an apt-get install command into its options and packages (up to the end
// of the command: &&, ;, |, a redirection or a comment).
func aptArgs(cmd string) (opts, pkgs []string) {
	_, rest, _ := strings.Cut(cmd, "apt-get install")
	for _, w := range strings.Fields(rest) {
		if w == "&&" || w == ";" || w == "|" || strings.HasPrefix(w, "#") || redirection.MatchString(w) {
			break
		}
		if strings.HasPrefix(w, "-") {
			opts = append(opts, w)
		} else {
			pkgs = append(pkgs, w)
		}
	}
	return opts, pkgs
}

// missingFrom lists the members of a that b lacks, sorted.
func missingFrom(a, b []string) []string {
	var out []string
	for _, p := range a {
		if !slices.Contains(b, p) && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

func duplicates(list []string) []string {
	var out []string
	for i, p := range list {
		if slices.Contains(list[:i], p) && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// TestAptPackagesAgree: the packages CI installs (.ci/run, from .ci/packages.txt) are the
// ones the README tells a newcomer to install before `make demo` and `make test`, so a
// package added for a test reaches both or the suite fails.
func TestAptPackagesAgree(t *testing.T) {
	root := repoRoot(t)
	ci := ciPackages(t, root)
	if len(ci) == 0 {
		t.Fatal(".ci/packages.txt lists no package")
	}
	run, err := os.ReadFile(filepath.Join(root, ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	// .ci/run must install exactly the file's list: one apt-get install, of that list only.
	installs := regexp.MustCompile(`(?m)^[^#\n]*apt-get install[^\n]*$`).FindAllString(string(run), -1)
	if len(installs) != 1 || !strings.Contains(string(run), ".ci/packages.txt") ||
		!strings.Contains(installs[0], `"${packages[@]}"`) {
		t.Fatalf(".ci/run must run one apt-get install of \"${packages[@]}\" read from .ci/packages.txt (and nothing else), found %q", installs)
	}
	if _, extra := aptArgs(strings.ReplaceAll(installs[0], `"${packages[@]}"`, "")); len(extra) > 0 {
		t.Errorf(".ci/run installs %v besides .ci/packages.txt: add them to the file instead", extra)
	}
	ciOpts, _ := aptArgs(installs[0])

	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	line := readmeAptLine(t, string(b))
	opts, readme := aptArgs(line)
	if d := duplicates(ci); len(d) > 0 {
		t.Errorf(".ci/packages.txt lists %v more than once", d)
	}
	if d := duplicates(readme); len(d) > 0 {
		t.Errorf("README's apt-get line lists %v more than once", d)
	}
	if only := missingFrom(ci, readme); len(only) > 0 {
		t.Errorf("in .ci/packages.txt but not in README's apt-get line: %s", strings.Join(only, " "))
	}
	if only := missingFrom(readme, ci); len(only) > 0 {
		t.Errorf("in README's apt-get line but not in .ci/packages.txt: %s", strings.Join(only, " "))
	}
	if slices.Contains(ciOpts, "--no-install-recommends") && !slices.Contains(opts, "--no-install-recommends") {
		t.Errorf("README's apt-get line lacks --no-install-recommends, which .ci/run uses (so a newcomer gets what CI tests)")
	}
	if t.Failed() {
		t.Logf("README line:\n  %s\n.ci/packages.txt:\n  %s", line, strings.Join(ci, " "))
	}
}

// TestAptArgs pins the parsing the agreement test relies on.
func TestAptArgs(t *testing.T) {
	opts, pkgs := aptArgs("apt-get update && apt-get install -y --no-install-recommends make gcc && make demo # x")
	if !slices.Equal(opts, []string{"-y", "--no-install-recommends"}) || !slices.Equal(pkgs, []string{"make", "gcc"}) {
		t.Errorf("aptArgs = %q %q", opts, pkgs)
	}
	if _, pkgs := aptArgs(`apt-get install -qq "${packages[@]}" 2>&1 >/dev/null`); !slices.Equal(pkgs, []string{`"${packages[@]}"`}) {
		t.Errorf("aptArgs took a redirection for a package: %q", pkgs)
	}
	if got := missingFrom([]string{"b", "a", "c"}, []string{"c"}); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("missingFrom = %q", got)
	}
}

// TestDemoScriptNamesMissingTools: on a PATH without pgrep, make demo stops at once and
// says which Debian package to install, instead of running a check that cannot fail.
func TestDemoScriptNamesMissingTools(t *testing.T) {
	t.Parallel()
	bash := requireTool(t, "bash", "apt-get install bash")
	cmd := exec.Command(bash, "examples/demo/demo.sh")
	cmd.Dir = repoRoot(t)
	cmd.Env = append(os.Environ(), "PATH="+t.TempDir(), "GO="+goTool())
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("demo.sh without pgrep: %v, want exit status 1\n%s", err, out)
	}
	for _, want := range []string{"missing pgrep", "apt-get install procps"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("demo.sh without pgrep does not say %q:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), "no demo process left behind") {
		t.Errorf("demo.sh claimed a clean exit without pgrep:\n%s", out)
	}
}

// TestMakeDemoLeavesTreeClean runs a short `make demo` in a copy of this tree, committed in
// a new git repository: it must exit 0, say it left no process, write its picture under the
// ignored bin/ and leave `git status --porcelain` empty (a dirty tree stamps the next build
// -dirty).
func TestMakeDemoLeavesTreeClean(t *testing.T) {
	t.Parallel()
	makeBin := requireTool(t, "make", "apt-get install make")
	gitBin := requireTool(t, "git", "apt-get install git")
	requireTool(t, "pgrep", "apt-get install procps")
	requireTool(t, "haproxy", "apt-get install haproxy")
	src := filepath.Join(t.TempDir(), "src")
	copyWorkTree(t, gitBin, repoRoot(t), src)
	gitEnv := append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(gitBin, args...)
		cmd.Dir, cmd.Env = src, gitEnv
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	git("init", "-q")
	git("add", "-A")
	git("commit", "-q", "--no-verify", "-m", "snapshot")
	if st := git("status", "--porcelain"); st != "" {
		t.Fatalf("the copy is not clean before make demo:\n%s", st)
	}

	tmp := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, makeBin, "demo", "GO="+goTool(),
		"DEMO_ARGS=-phase1 6s -phase2 10s -conns 60 -interval 2s")
	cmd.Dir = src
	cmd.Env = append(gitEnv, "TMPDIR="+tmp)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make demo: %v\n%s", err, out)
	}
	for _, want := range []string{"picture: bin/demo.png", "no demo process left behind"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("make demo output lacks %q:\n%s", want, out)
		}
	}
	if _, err := os.Stat(filepath.Join(src, "bin", "demo.png")); err != nil {
		t.Errorf("make demo wrote no picture at bin/demo.png: %v", err)
	}
	if st := git("status", "--porcelain", "--untracked-files=all"); st != "" {
		t.Errorf("make demo left the tree dirty (the next make build would stamp -dirty):\n%s", st)
	}
	if left := processesMentioning(src); len(left) > 0 {
		t.Errorf("make demo left processes behind:\n%s", strings.Join(left, "\n"))
	}
}

// copyWorkTree copies the files git would commit from root (tracked and untracked, not
// ignored; as they are on disk) to dst.
func copyWorkTree(t *testing.T, gitBin, root, dst string) {
	t.Helper()
	cmd := exec.Command(gitBin, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	for _, name := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		from := filepath.Join(root, name)
		fi, err := os.Lstat(from)
		if err != nil || !fi.Mode().IsRegular() {
			continue // deleted in the work tree, or a symlink/submodule
		}
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		to := filepath.Join(dst, name)
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, b, fi.Mode().Perm()|fs.FileMode(0o200)); err != nil {
			t.Fatal(err)
		}
	}
}
