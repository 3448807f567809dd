// Package haproxycfg reads HAProxy's configuration file and says what in it
// keeps the daemon from weighting the backends it is given: a backend or
// server that is not there, a balance algorithm whose weights cannot change
// at runtime, a stats socket below level admin, byte counters that move only
// when a connection closes, weights lost at each reload.
//
// Lines are split into words by the tokenizer of client-native's
// configuration parser (config-parser/common), the one HAProxy's Data Plane
// API uses; the dozen keywords the checks need are read here. The parser
// itself is not linked: its section parsers, generated types and option
// tables made the daemon binary 1.9 MB larger, and its individual line
// parsers 192 KB, against 4 KB for the tokenizer.
package haproxycfg

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/haproxytech/client-native/v5/config-parser/common"
)

// directive is one non-empty line of a section, split into words.
type directive struct {
	line  int
	words []string
}

// section is a global, defaults, frontend, backend or listen section, or
// another section whose content the checks do not need (kept for its name).
type section struct {
	kind string
	name string
	line int
	// from is the defaults section named by "from", "" when the section
	// takes the last defaults section before it.
	from string
	// defaults is the defaults section it inherits from (nil: none).
	defaults *section
	body     []directive
}

// File is a parsed HAProxy configuration file.
type File struct {
	Path     string
	global   []directive
	sections []*section
}

// sectionKinds are HAProxy 2.6's section keywords (configuration.txt,
// sections 3 and 4, and the sections of the other subsystems). A line whose
// first word is one of them starts a section.
var sectionKinds = map[string]bool{
	"global": true, "defaults": true, "frontend": true, "backend": true, "listen": true,
	"resolvers": true, "peers": true, "userlist": true, "mailers": true, "program": true,
	"http-errors": true, "ring": true, "cache": true, "log-forward": true, "fcgi-app": true,
}

// Read reads and parses the configuration file at path.
func Read(path string) (*File, error) {
	// A FIFO's open blocks until someone writes, a device may never end:
	// either would hold up the daemon's start or reload, and its weighting.
	if st, err := os.Stat(path); err == nil && !st.Mode().IsRegular() && !st.IsDir() {
		return nil, fmt.Errorf("read HAProxy configuration: %s: not a regular file (%s)", path, st.Mode().Type())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read HAProxy configuration: %w", err) // the error names the path
	}
	return Parse(path, bytes.NewReader(data))
}

// Parse parses a configuration read from r; path names it in messages.
// It refuses what is not an HAProxy configuration (a word outside any
// section, no proxy or global section at all), as HAProxy would.
func Parse(path string, r io.Reader) (*File, error) {
	f := &File{Path: path}
	var cur *section
	var lastDefaults *section
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for n := 1; sc.Scan(); n++ {
		words, _ := common.StringSplitWithCommentIgnoreEmpty(sc.Text())
		if len(words) == 0 {
			continue
		}
		for i, w := range words {
			words[i] = unquote(w)
		}
		if sectionKinds[words[0]] {
			cur = &section{kind: words[0], line: n}
			if len(words) > 1 && words[1] != "from" {
				cur.name = words[1]
			}
			for i := 1; i+1 < len(words); i++ {
				if words[i] == "from" {
					cur.from = words[i+1]
				}
			}
			// A proxy takes the last defaults section before it; a
			// defaults section inherits only from the one "from" names.
			switch cur.kind {
			case "frontend", "backend", "listen":
				cur.defaults = lastDefaults
			case "defaults":
				lastDefaults = cur
			}
			if cur.from != "" {
				cur.defaults = f.named("defaults", cur.from)
			}
			f.sections = append(f.sections, cur)
			continue
		}
		if cur == nil {
			// Conditional blocks (.if, .endif) and diagnostics (.notice)
			// may stand before any section; anything else may not.
			if words[0][0] == '.' {
				continue
			}
			return nil, fmt.Errorf("%s:%d: %q is outside any section: not an HAProxy configuration", path, n, words[0])
		}
		d := directive{line: n, words: words}
		if cur.kind == "global" {
			f.global = append(f.global, d)
		}
		cur.body = append(cur.body, d)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if !f.hasProxyOrGlobal() {
		return nil, fmt.Errorf("%s: %w", path, errNoSections)
	}
	return f, nil
}

// unquote returns a word the tokenizer kept with its quotes ("x" or 'x',
// as HAProxy 2.6 accepts any word) without them.
func unquote(w string) string {
	if len(w) >= 2 && (w[0] == '"' || w[0] == '\'') && w[len(w)-1] == w[0] {
		return w[1 : len(w)-1]
	}
	return w
}

var errNoSections = errors.New("no global, defaults, frontend, backend or listen section: not an HAProxy configuration")

func (f *File) hasProxyOrGlobal() bool {
	for _, s := range f.sections {
		switch s.kind {
		case "global", "defaults", "frontend", "backend", "listen":
			return true
		}
	}
	return false
}

// named returns the last section of that kind and name, or nil.
func (f *File) named(kind, name string) *section {
	var found *section
	for _, s := range f.sections {
		if s.kind == kind && s.name == name {
			found = s
		}
	}
	return found
}

// proxy returns the backend or listen section called name, and the
// frontend of that name when there is none (to say so), or nil.
func (f *File) proxy(name string) *section {
	if s := f.named("backend", name); s != nil {
		return s
	}
	if s := f.named("listen", name); s != nil {
		return s
	}
	return f.named("frontend", name)
}

// lookup returns the directive of s that sets a keyword (match says which
// one does), the last one in s, else the one s's defaults set, as HAProxy
// resolves settings ("from" names an earlier section, so the chain ends).
// ok is false when neither sets it.
func (s *section) lookup(match func(words []string) bool) (directive, bool) {
	for cur := s; cur != nil; cur = cur.defaults {
		for i := len(cur.body) - 1; i >= 0; i-- {
			if match(cur.body[i].words) {
				return cur.body[i], true
			}
		}
	}
	return directive{}, false
}

// keyword matches a directive whose first words are kw.
func keyword(kw ...string) func([]string) bool {
	return func(words []string) bool {
		if len(words) < len(kw) {
			return false
		}
		for i, k := range kw {
			if words[i] != k {
				return false
			}
		}
		return true
	}
}

// option reports whether `option name` is in force in s: set in s or its
// defaults and not undone by `no option name` (or reset to HAProxy's default,
// off, by `default option name`) closer to s.
func (s *section) option(name string) (on bool, d directive) {
	d, ok := s.lookup(func(w []string) bool {
		return keyword("option", name)(w) || keyword("no", "option", name)(w) || keyword("default", "option", name)(w)
	})
	return ok && d.words[0] == "option", d
}
