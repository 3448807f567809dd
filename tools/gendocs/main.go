// Command gendocs writes the shell completion scripts and the man pages of haproxy-weighter,
// generated from the binary's own command tree (cmd.Root), so they list exactly the commands
// and flags the binary has. `make deb` runs it; the .deb installs what it writes:
//
//	<out>/completion/haproxy-weighter       bash: /usr/share/bash-completion/completions/
//	<out>/completion/_haproxy-weighter      zsh:  /usr/share/zsh/vendor-completions/
//	<out>/completion/haproxy-weighter.fish  fish: /usr/share/fish/vendor_completions.d/
//	<out>/man/haproxy-weighter[-<command>].1.gz, one page per command: /usr/share/man/man1/
//
// The pages' date is SOURCE_DATE_EPOCH when set (the Makefile sets the commit's time), so a
// build from the same commit writes the same bytes.
package main

import (
	"bytes"
	"compress/gzip"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"

	"github.com/haproxy-weighter/haproxy-weighter/cmd"
)

func main() {
	out := flag.String("out", "bin/deb", "directory to write completion/ and man/ into")
	version := flag.String("version", cmd.Version, "version named in the man pages' footer")
	extra := flag.String("root-extra", "", "roff file inserted into the haproxy-weighter(1) page before SEE ALSO (FILES and the like)")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "gendocs: no arguments expected; see -help")
		os.Exit(2)
	}
	date, err := sourceDate()
	if err == nil {
		err = generate(cmd.NewRoot(os.Stdout, os.Stderr), *out, *version, *extra, date)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gendocs:", err)
		os.Exit(1)
	}
}

// sourceDate is SOURCE_DATE_EPOCH (the reproducible-builds convention), else now.
func sourceDate() (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		return time.Now().UTC(), nil
	}
	sec, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH %q: %v", s, err)
	}
	return time.Unix(sec, 0).UTC(), nil
}

// generate writes the completion scripts and the man pages of root's tree under out.
func generate(root *cobra.Command, out, version, extraFile string, date time.Time) error {
	// The binary adds the completion command when it runs (cobra's ExecuteC): add it here too,
	// so that it has its page like every other command.
	root.InitDefaultCompletionCmd()
	root.DisableAutoGenTag = true // no "Auto generated" history line, and no date in it

	compDir, manDir := filepath.Join(out, "completion"), filepath.Join(out, "man")
	for _, d := range []string{compDir, manDir} {
		if err := os.RemoveAll(d); err != nil {
			return err
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	name := root.Name()
	for file, gen := range map[string]func(io.Writer) error{
		name:           func(w io.Writer) error { return root.GenBashCompletionV2(w, true) },
		"_" + name:     root.GenZshCompletion,
		name + ".fish": func(w io.Writer) error { return root.GenFishCompletion(w, true) },
	} {
		var b bytes.Buffer
		if err := gen(&b); err != nil {
			return fmt.Errorf("%s: %v", file, err)
		}
		if err := os.WriteFile(filepath.Join(compDir, file), b.Bytes(), 0o644); err != nil {
			return err
		}
	}

	var extra []byte
	if extraFile != "" {
		var err error
		if extra, err = os.ReadFile(extraFile); err != nil {
			return err
		}
	}
	return manPages(root, manDir, &doc.GenManHeader{
		Section: "1",
		Date:    &date,
		Source:  name + " " + version,
		Manual:  "User Commands",
	}, extra)
}

// manPages writes c's page and those of its available subcommands (not help, not hidden);
// extra goes into the root's page.
func manPages(c *cobra.Command, dir string, header *doc.GenManHeader, extra []byte) error {
	for _, sub := range c.Commands() {
		if !sub.IsAvailableCommand() || sub.IsAdditionalHelpTopicCommand() {
			continue
		}
		if err := manPages(sub, dir, header, extra); err != nil {
			return err
		}
	}
	h := *header // GenMan fills in the title
	var page bytes.Buffer
	if err := doc.GenMan(c, &h, &page); err != nil {
		return fmt.Errorf("man page of %s: %v", c.CommandPath(), err)
	}
	text := page.Bytes()
	if !c.HasParent() && len(extra) > 0 {
		var err error
		if text, err = insertBefore(text, ".SH SEE ALSO\n", extra); err != nil {
			return err
		}
	}
	base := strings.ReplaceAll(c.CommandPath(), " ", "-") + "." + header.Section + ".gz"
	return writeGzip(filepath.Join(dir, base), text)
}

// insertBefore puts extra (ending in a newline) before the line mark of page.
func insertBefore(page []byte, mark string, extra []byte) ([]byte, error) {
	i := bytes.Index(page, []byte(mark))
	if i < 0 || (i > 0 && page[i-1] != '\n') {
		return nil, fmt.Errorf("the root man page has no %q line to put the extra sections before", strings.TrimSpace(mark))
	}
	if !bytes.HasSuffix(extra, []byte("\n")) {
		extra = append(extra, '\n')
	}
	return append(append(append([]byte{}, page[:i]...), extra...), page[i:]...), nil
}

// writeGzip writes text gzipped at the best compression with no name and no time in the
// header, as Debian wants its man pages (gzip -9n).
func writeGzip(path string, text []byte) error {
	var b bytes.Buffer
	zw, err := gzip.NewWriterLevel(&b, gzip.BestCompression)
	if err != nil {
		return err
	}
	if _, err := zw.Write(text); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}
