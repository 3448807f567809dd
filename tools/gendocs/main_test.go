package main

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/haproxy-weighter/haproxy-weighter/cmd"
)

var testDate = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// pages lists the man pages (gunzipped, by file name) that generate wrote to dir/man.
func pages(t *testing.T, dir string) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "man", "*"))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		// gzip -n: no file name, no time (reproducible, as Debian wants).
		if zr.Name != "" || !zr.ModTime.IsZero() {
			t.Errorf("%s: gzip header has name %q, time %v", f, zr.Name, zr.ModTime)
		}
		text, err := io.ReadAll(zr)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		got[filepath.Base(f)] = string(text)
	}
	return got
}

// commands is every command of the tree that has a page: not help, not hidden.
func commands(c *cobra.Command) []*cobra.Command {
	list := []*cobra.Command{c}
	for _, sub := range c.Commands() {
		if sub.IsAvailableCommand() && !sub.IsAdditionalHelpTopicCommand() {
			list = append(list, commands(sub)...)
		}
	}
	return list
}

// unroff undoes the roff escapes of the pages' text that matter for finding flag names.
func unroff(s string) string {
	return strings.NewReplacer(`\-`, "-", `\fB`, "", `\fP`, "", `\fI`, "", `\fR`, "", `\(aq`, "'").Replace(s)
}

// TestManPageForEveryCommand generates the pages of the daemon's real command tree and checks
// that each command has one, with its name, its usage and every flag it takes.
func TestManPageForEveryCommand(t *testing.T) {
	dir := t.TempDir()
	root := cmd.NewRoot(os.Stdout, os.Stderr)
	if err := generate(root, dir, "1.2.3", "../../packaging/haproxy-weighter.1.extra", testDate); err != nil {
		t.Fatal(err)
	}
	got := pages(t, dir)
	var want []string
	for _, c := range commands(root) {
		path := strings.ReplaceAll(c.CommandPath(), " ", "-")
		name := path + ".1.gz"
		want = append(want, name)
		page, ok := got[name]
		if !ok {
			t.Errorf("no page %s for %q", name, c.CommandPath())
			continue
		}
		text := unroff(page)
		if !strings.Contains(page, `.TH "`+strings.ToUpper(path)+`" "1" "Mar 2026" "haproxy-weighter 1.2.3" "User Commands"`) {
			t.Errorf("%s: header is not the command, section 1, the date and version:\n%s", name, firstLines(page, 3))
		}
		if !strings.Contains(text, ".SH NAME\n"+path+" - "+c.Short) {
			t.Errorf("%s: NAME is not %q:\n%s", name, path+" - "+c.Short, firstLines(page, 6))
		}
		if !strings.Contains(text, c.UseLine()) {
			t.Errorf("%s: lacks the usage %q", name, c.UseLine())
		}
		flags := 0
		for _, fs := range []*pflag.FlagSet{c.NonInheritedFlags(), c.InheritedFlags()} {
			fs.VisitAll(func(f *pflag.Flag) {
				if f.Hidden || f.Deprecated != "" {
					return
				}
				flags++
				// --name=default, or --name[=value] for a flag that needs no value
				if !strings.Contains(text, "--"+f.Name+"=") && !strings.Contains(text, "--"+f.Name+"[=") {
					t.Errorf("%s: lacks flag --%s", name, f.Name)
				}
				if f.Usage != "" && !strings.Contains(text, unroff(f.Usage)) && !strings.Contains(text, firstWords(f.Usage, 3)) {
					t.Errorf("%s: lacks the description of --%s (%q)", name, f.Name, f.Usage)
				}
			})
		}
		if flags == 0 {
			t.Errorf("%s: found no flags to check (--help at least)", c.CommandPath())
		}
	}
	sort.Strings(want)
	var names []string
	for n := range got {
		names = append(names, n)
	}
	sort.Strings(names)
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Errorf("pages %v, want %v", names, want)
	}
	// The commands the daemon documents, the hidden simulate stand-in not among them.
	for _, n := range []string{"haproxy-weighter.1.gz", "haproxy-weighter-run.1.gz", "haproxy-weighter-once.1.gz",
		"haproxy-weighter-validate.1.gz", "haproxy-weighter-calc.1.gz", "haproxy-weighter-version.1.gz", "haproxy-weighter-completion.1.gz"} {
		if _, ok := got[n]; !ok {
			t.Errorf("no page %s", n)
		}
	}
	if _, ok := got["haproxy-weighter-simulate.1.gz"]; ok {
		t.Error("the hidden simulate command has a page")
	}
	// The FILES section goes into the root page only, before SEE ALSO.
	rootPage := got["haproxy-weighter.1.gz"]
	files, see := strings.Index(rootPage, ".SH FILES\n"), strings.Index(rootPage, ".SH SEE ALSO\n")
	if files < 0 || see < files || !strings.Contains(rootPage, "/etc/haproxy-weighter/config.yaml") {
		t.Errorf("root page: FILES at %d, SEE ALSO at %d:\n%s", files, see, rootPage)
	}
	if strings.Contains(got["haproxy-weighter-run.1.gz"], ".SH FILES") {
		t.Error("the run page got the root page's FILES section")
	}
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}

func firstWords(s string, n int) string {
	w := strings.Fields(s)
	if len(w) > n {
		w = w[:n]
	}
	return strings.Join(w, " ")
}

// TestGenerateIsReproducible: the same tree and date give the same bytes, also when the
// output directory held pages of a command that no longer exists.
func TestGenerateIsReproducible(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(b, "man"), 0o755); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(b, "man", "haproxy-weighter-gone.1.gz")
	if err := os.WriteFile(stale, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{a, b} {
		if err := generate(cmd.NewRoot(os.Stdout, os.Stderr), dir, "1.2.3", "", testDate); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(stale); err == nil {
		t.Error("a stale page survived")
	}
	for _, sub := range []string{"man", "completion"} {
		entries, err := os.ReadDir(filepath.Join(a, sub))
		if err != nil || len(entries) == 0 {
			t.Fatalf("%s: %v %v", sub, entries, err)
		}
		for _, e := range entries {
			x, _ := os.ReadFile(filepath.Join(a, sub, e.Name()))
			y, err := os.ReadFile(filepath.Join(b, sub, e.Name()))
			if err != nil || !bytes.Equal(x, y) {
				t.Errorf("%s/%s differs between two runs (%v)", sub, e.Name(), err)
			}
		}
	}
}

// TestCompletionScripts: one script per shell, each for the binary's name and calling back
// into it (cobra's __complete), so they complete the flags the installed binary has.
func TestCompletionScripts(t *testing.T) {
	dir := t.TempDir()
	if err := generate(cmd.NewRoot(os.Stdout, os.Stderr), dir, "1.2.3", "", testDate); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{
		"haproxy-weighter":      "complete -o default -F __start_haproxy-weighter haproxy-weighter",
		"_haproxy-weighter":     "#compdef haproxy-weighter",
		"haproxy-weighter.fish": "complete -c haproxy-weighter ",
	} {
		b, err := os.ReadFile(filepath.Join(dir, "completion", file))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), want) || !strings.Contains(string(b), "__complete") {
			t.Errorf("%s lacks %q or the __complete call", file, want)
		}
	}
}

func TestInsertBefore(t *testing.T) {
	got, err := insertBefore([]byte(".SH A\na\n.SH SEE ALSO\nb\n"), ".SH SEE ALSO\n", []byte(".SH FILES\nf"))
	if err != nil || string(got) != ".SH A\na\n.SH FILES\nf\n.SH SEE ALSO\nb\n" {
		t.Errorf("got %q, %v", got, err)
	}
	// Only at the start of a line; a page without the mark is an error, not a page without FILES.
	if _, err := insertBefore([]byte("x.SH SEE ALSO\n"), ".SH SEE ALSO\n", []byte("e\n")); err == nil {
		t.Error("inserted before a mark in the middle of a line")
	}
	if _, err := insertBefore([]byte(".SH NAME\n"), ".SH SEE ALSO\n", []byte("e\n")); err == nil {
		t.Error("no error for a page without SEE ALSO")
	}
}

func TestSourceDate(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "1767225600")
	if d, err := sourceDate(); err != nil || !d.Equal(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("got %v, %v", d, err)
	}
	t.Setenv("SOURCE_DATE_EPOCH", "yesterday")
	if _, err := sourceDate(); err == nil {
		t.Error("no error for a SOURCE_DATE_EPOCH that is not a number")
	}
}
