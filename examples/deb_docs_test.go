package examples

import (
	"compress/gzip"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/haproxy-weighter/haproxy-weighter/cmd"
)

// The package's shell completion and man pages are checked in the built .deb, unpacked with
// dpkg-deb -x: each completion script is loaded the way its shell finds it in the directory the
// package installs it to, and completes the unpacked binary's commands and flags by asking it
// (cobra's __complete); each command has a man page, found by man, with every flag it takes.

// debCommands are the commands completion must offer and that have a page of their own.
var debCommands = []string{"run", "once", "validate", "calc", "version", "completion"}

const (
	bashCompletion = "usr/share/bash-completion/completions/haproxy-weighter"
	zshCompletion  = "usr/share/zsh/vendor-completions/_haproxy-weighter"
	fishCompletion = "usr/share/fish/vendor_completions.d/haproxy-weighter.fish"
)

var (
	unpackOnce sync.Once
	unpacked   string
	unpackErr  error
)

// unpackedDeb is the package of version debVersionA unpacked with dpkg-deb -x, once per run.
func unpackedDeb(t *testing.T) string {
	t.Helper()
	requireTool(t, "dpkg-deb", "apt-get install dpkg")
	deb, _ := buildDebs(t)
	unpackOnce.Do(func() {
		unpacked = filepath.Join(tmpRoot, "deb-unpacked")
		if out, err := runErr(time.Minute, "dpkg-deb", "-x", deb, unpacked); err != nil {
			unpackErr = err
			unpacked = out
		}
	})
	if unpackErr != nil {
		t.Fatalf("dpkg-deb -x: %v\n%s", unpackErr, unpacked)
	}
	return unpacked
}

// shellRun runs a shell script in a bare environment whose PATH starts with the unpacked
// package's /usr/bin (completion runs the binary) and whose XDG_DATA_DIRS is its /usr/share
// (where bash-completion and fish look for completion files), and returns its output.
func shellRun(t *testing.T, root string, shell ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, shell[0], shell[1:]...)
	c.Env = []string{
		"PATH=" + filepath.Join(root, "usr/bin") + ":/usr/bin:/bin",
		"HOME=" + t.TempDir(),
		"XDG_DATA_DIRS=" + filepath.Join(root, "usr/share"),
		"LC_ALL=C.UTF-8",
	}
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(shell, " "), err, out)
	}
	return string(out)
}

// wantCompletions checks that the section of out after marker (up to the next "---") has a
// line starting with each of want, as a shell lists candidates.
func wantCompletions(t *testing.T, shell, out, marker string, want ...string) {
	t.Helper()
	_, section, ok := strings.Cut(out, marker+"\n")
	if !ok {
		t.Errorf("%s: no %q in the output:\n%s", shell, marker, out)
		return
	}
	section, _, _ = strings.Cut(section, "---")
	var words []string
	for _, line := range strings.Split(section, "\n") {
		if w := strings.FieldsFunc(line, func(r rune) bool { return r == '\t' || r == ' ' || r == ':' }); len(w) > 0 {
			words = append(words, w[0])
		}
	}
	for _, w := range want {
		if !slices.Contains(words, w) {
			t.Errorf("%s: completing %s does not offer %s, got %q", shell, marker, w, words)
		}
	}
}

func TestDebShipsCompletionForEachShell(t *testing.T) {
	root := unpackedDeb(t)
	for _, f := range []string{bashCompletion, zshCompletion, fishCompletion} {
		fi, err := os.Stat(filepath.Join(root, f))
		if err != nil || fi.Mode().Perm() != 0o644 || fi.Size() == 0 {
			t.Errorf("/%s: %v %v, want a non-empty file with mode 0644", f, fi, err)
		}
	}
}

// TestDebBashCompletion loads the script the way bash-completion does for a command it has
// not seen (from XDG_DATA_DIRS/bash-completion/completions), then completes.
func TestDebBashCompletion(t *testing.T) {
	root := unpackedDeb(t)
	bash := requireTool(t, "bash", "apt-get install bash")
	const framework = "/usr/share/bash-completion/bash_completion"
	if _, err := os.Stat(framework); err != nil {
		t.Fatalf("%s: %v: install it with `apt-get install bash-completion`", framework, err)
	}
	// The check the packaging asks of a completion file: it loads and registers the command.
	out := shellRun(t, root, bash, "--norc", "--noprofile", "-c", `source "$1" && complete -p haproxy-weighter`, "bash", filepath.Join(root, bashCompletion))
	if !regexp.MustCompile(`(?m)^complete .*-F \S+ haproxy-weighter$`).MatchString(out) {
		t.Errorf("complete -p haproxy-weighter after sourcing the script: %q", out)
	}
	out = shellRun(t, root, bash, "--norc", "--noprofile", "-c", `
source `+framework+`
__load_completion haproxy-weighter || { echo "bash-completion found no completion for haproxy-weighter"; exit 1; }
fn=$(complete -p haproxy-weighter | sed -n 's/.* -F \([^ ]*\) .*/\1/p')
comp() {
    COMP_LINE=$1 COMP_POINT=${#1} COMPREPLY=()
    read -ra COMP_WORDS <<<"$COMP_LINE"
    [[ $COMP_LINE == *" " ]] && COMP_WORDS+=("")
    COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
    echo "$COMP_LINE"
    "$fn" haproxy-weighter "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
    printf '%s\n' "${COMPREPLY[@]}" ---
}
comp "haproxy-weighter "
comp "haproxy-weighter run --li"
comp "haproxy-weighter once --"
`)
	wantCompletions(t, "bash", out, "haproxy-weighter ", debCommands...)
	wantCompletions(t, "bash", out, "haproxy-weighter run --li", "--listen", "--limiting-factor")
	wantCompletions(t, "bash", out, "haproxy-weighter once --", "--apply", "--config", "--log-level")
}

// TestDebZshCompletion: compinit finds the script in the package's directory through its
// #compdef line, and the function it registers completes by asking the binary. zsh's _describe
// (which fills the menu inside a completion widget) is replaced by a print of its candidates.
func TestDebZshCompletion(t *testing.T) {
	root := unpackedDeb(t)
	zsh := requireTool(t, "zsh", "apt-get install zsh")
	// Debian's zsh searches the package's directory without any configuration.
	fpath := shellRun(t, root, zsh, "-f", "-c", `print -l -- $fpath`)
	if !slices.Contains(strings.Fields(fpath), "/"+filepath.Dir(zshCompletion)) {
		t.Errorf("zsh's $fpath lacks /%s:\n%s", filepath.Dir(zshCompletion), fpath)
	}
	out := shellRun(t, root, zsh, "-f", "-c", `
fpath=(`+filepath.Join(root, filepath.Dir(zshCompletion))+` $fpath)
autoload -Uz compinit && compinit -u -D
print -r -- "function: $_comps[haproxy-weighter]"
_describe() { print -rl -- "${completions[@]}" }
comp() {
    local -a words=(${(z)1})
    [[ $1 == *" " ]] && words+=("")
    local CURRENT=${#words}
    print -r -- "$1"
    $_comps[haproxy-weighter]
    print -- ---
}
comp "haproxy-weighter "
comp "haproxy-weighter run --li"
`)
	if !strings.Contains(out, "function: _haproxy-weighter\n") {
		t.Errorf("compinit did not register _haproxy-weighter for haproxy-weighter:\n%s", out)
	}
	wantCompletions(t, "zsh", out, "haproxy-weighter ", debCommands...)
	wantCompletions(t, "zsh", out, "haproxy-weighter run --li", "--listen", "--limiting-factor")
}

// TestDebFishCompletion: fish autoloads the script from XDG_DATA_DIRS/fish/vendor_completions.d
// when asked to complete haproxy-weighter.
func TestDebFishCompletion(t *testing.T) {
	root := unpackedDeb(t)
	fish := requireTool(t, "fish", "apt-get install fish")
	run(t, time.Minute, fish, "--no-execute", filepath.Join(root, fishCompletion))
	out := shellRun(t, root, fish, "-c", `
for line in "haproxy-weighter " "haproxy-weighter run --li"
    echo $line
    complete --do-complete=$line
    echo ---
end`)
	wantCompletions(t, "fish", out, "haproxy-weighter ", debCommands...)
	wantCompletions(t, "fish", out, "haproxy-weighter run --li", "--listen", "--limiting-factor")
}

// debPageCommands is the tree the binary runs: its commands (cobra adds completion when the
// binary runs) less help and hidden ones.
func debPageCommands() []*cobra.Command {
	root := cmd.NewRoot(os.Stdout, os.Stderr)
	root.InitDefaultCompletionCmd()
	var walk func(c *cobra.Command) []*cobra.Command
	walk = func(c *cobra.Command) []*cobra.Command {
		list := []*cobra.Command{c}
		for _, sub := range c.Commands() {
			if sub.IsAvailableCommand() && !sub.IsAdditionalHelpTopicCommand() {
				list = append(list, walk(sub)...)
			}
		}
		return list
	}
	return walk(root)
}

// TestDebManPages: each command has a gzipped page in /usr/share/man/man1 that man finds by
// the command's name and that lists every flag the command takes; no page is left for a
// command the binary lacks.
func TestDebManPages(t *testing.T) {
	root := unpackedDeb(t)
	man := requireTool(t, "man", "apt-get install man-db")
	manDir := filepath.Join(root, "usr/share/man")
	pages, _ := filepath.Glob(filepath.Join(manDir, "man1", "*"))
	var want []string
	seen := map[string]bool{}
	for _, c := range debPageCommands() {
		name := strings.ReplaceAll(c.CommandPath(), " ", "-")
		want = append(want, filepath.Join(manDir, "man1", name+".1.gz"))
		seen[c.Name()] = true
		text := run(t, time.Minute, "env", "MANWIDTH=300", "LC_ALL=C.UTF-8", man, "-M", manDir, "1", name)
		if !strings.Contains(text, name+" - "+c.Short) {
			t.Errorf("man %s: NAME lacks %q:\n%s", name, name+" - "+c.Short, text)
		}
		for _, fs := range []*pflag.FlagSet{c.NonInheritedFlags(), c.InheritedFlags()} {
			fs.VisitAll(func(f *pflag.Flag) {
				if !f.Hidden && !strings.Contains(text, "--"+f.Name+"=") && !strings.Contains(text, "--"+f.Name+"[=") {
					t.Errorf("man %s lacks --%s:\n%s", name, f.Name, text)
				}
			})
		}
	}
	slices.Sort(want)
	slices.Sort(pages)
	if !slices.Equal(pages, want) {
		t.Errorf("/usr/share/man/man1 holds %v, want %v", pages, want)
	}
	for _, c := range debCommands {
		if !seen[c] {
			t.Errorf("the command tree has no %s command", c)
		}
	}
	// The package's files, in the root page only.
	text := run(t, time.Minute, "env", "MANWIDTH=300", man, "-M", manDir, "1", "haproxy-weighter")
	for _, s := range []string{"FILES", "/etc/haproxy-weighter/config.yaml", "/lib/systemd/system/haproxy-weighter.service", "SEE ALSO"} {
		if !strings.Contains(text, s) {
			t.Errorf("man haproxy-weighter lacks %q:\n%s", s, text)
		}
	}
}

// TestDebDocFiles: the copyright file and the changelog are where Debian wants them, the
// changelog gzipped and naming the package's version.
func TestDebDocFiles(t *testing.T) {
	root := unpackedDeb(t)
	doc := filepath.Join(root, "usr/share/doc/haproxy-weighter")
	copyright, err := os.ReadFile(filepath.Join(doc, "copyright"))
	if err != nil || !strings.HasPrefix(string(copyright), "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/") ||
		!strings.Contains(string(copyright), "License: Apache-2.0") {
		t.Errorf("copyright: %v\n%s", err, copyright)
	}
	f, err := os.Open(filepath.Join(doc, "changelog.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	changelog, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if first, _, _ := strings.Cut(string(changelog), "\n"); first != "haproxy-weighter ("+debVersionA+") unstable; urgency=medium" {
		t.Errorf("changelog starts %q", first)
	}
	if !regexp.MustCompile(`(?m)^ -- .+ <.+>  \w{3}, \d\d \w{3} \d{4} \d\d:\d\d:\d\d [+-]\d{4}$`).Match(changelog) {
		t.Errorf("changelog has no trailer line with maintainer and date:\n%s", changelog)
	}
}
