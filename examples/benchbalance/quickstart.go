package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// quickStart is the weighter's command line as the README's Quick start gives it.
type quickStart struct {
	Line string   // the command as written (continuation lines joined)
	Args []string // its arguments after the program name, "once" replaced by "run"
}

// readQuickStart finds, in the README's "## Quick start" section, the first command
// `haproxy-weighter <sub> ...` and returns its arguments for `run`. With sub "once" (the
// command that shows what the daemon would do), the same flags are given to `run`;
// once-only flags (--apply, --output) are dropped.
func readQuickStart(readme, sub string) (quickStart, error) {
	b, err := os.ReadFile(readme)
	if err != nil {
		return quickStart{}, err
	}
	return parseQuickStart(string(b), sub)
}

func parseQuickStart(text, sub string) (quickStart, error) {
	section, ok := sectionOf(text, "## Quick start")
	if !ok {
		return quickStart{}, errors.New("README: no \"## Quick start\" section")
	}
	inCode := false
	var cmd strings.Builder
	for _, l := range strings.Split(section, "\n") {
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "```") {
			inCode, cmd = !inCode, strings.Builder{}
			continue
		}
		if !inCode {
			continue
		}
		if cmd.Len() == 0 {
			t = strings.TrimPrefix(t, "$ ")
			if !strings.HasPrefix(t, "haproxy-weighter "+sub+" ") {
				continue
			}
		}
		if strings.HasSuffix(t, "\\") {
			cmd.WriteString(strings.TrimSuffix(t, "\\") + " ")
			continue
		}
		cmd.WriteString(t)
		line := strings.Join(strings.Fields(cmd.String()), " ")
		words, err := shellWords(line)
		if err != nil {
			return quickStart{}, fmt.Errorf("README quick start %q: %w", line, err)
		}
		args := []string{"run"}
		for i := 2; i < len(words); i++ {
			switch name, _, _ := strings.Cut(words[i], "="); name {
			case "--apply":
				continue
			case "--output", "-o":
				if !strings.Contains(words[i], "=") {
					i++
				}
				continue
			}
			args = append(args, words[i])
		}
		return quickStart{Line: line, Args: args}, nil
	}
	return quickStart{}, fmt.Errorf("README quick start: no `haproxy-weighter %s` command", sub)
}

// sectionOf returns the text from the heading line to the next heading of the same level.
func sectionOf(text, heading string) (string, bool) {
	i := strings.Index(text, "\n"+heading+"\n")
	if i < 0 {
		return "", false
	}
	rest := text[i+len(heading)+2:]
	if j := strings.Index(rest, "\n## "); j >= 0 {
		rest = rest[:j]
	}
	return rest, true
}

// shellWords splits a command line as a POSIX shell would for words with '…', "…" and
// backslash escapes (no expansions).
func shellWords(s string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			if inWord {
				words, w, inWord = append(words, w.String()), strings.Builder{}, false
			}
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("unterminated '")
			}
			w.WriteString(s[i+1 : i+1+j])
			i, inWord = i+1+j, true
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`", s[i+1]) >= 0 {
					i++
				}
				w.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, errors.New(`unterminated "`)
			}
			inWord = true
		case c == '\\' && i+1 < len(s):
			i++
			w.WriteByte(s[i])
			inWord = true
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, nil
}

// flagValue is the value of --name in args ("--name v" or "--name=v"), and whether it is there.
func flagValue(args []string, name string) (string, bool) {
	for i, a := range args {
		if a == name && i+1 < len(args) {
			return args[i+1], true
		}
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// withFlag returns args with --name's value replaced by v (added at the end if absent).
func withFlag(args []string, name, v string) []string {
	out := append([]string(nil), args...)
	for i, a := range out {
		if a == name && i+1 < len(out) {
			out[i+1] = v
			return out
		}
		if strings.HasPrefix(a, name+"=") {
			out[i] = name + "=" + v
			return out
		}
	}
	return append(out, name, v)
}

// quote renders args for a shell, for printing.
func quote(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " '\"\\$()[]*?{}|&;<>`!#~") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		out[i] = a
	}
	return strings.Join(out, " ")
}
