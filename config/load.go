package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/haproxy-weighter/haproxy-weighter/internal/errs"
	"github.com/haproxy-weighter/haproxy-weighter/internal/readlimit"
	"github.com/haproxy-weighter/haproxy-weighter/sources"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

// Load reads, expands, decodes and validates the configuration file at path.
// ${NAME} in the file is replaced by the environment variable NAME.
func Load(path string) (*Config, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return Parse(path, data, os.LookupEnv)
}

// maxFileSize bounds what Load reads: a configuration is a few KiB, and a
// wrong path (/dev/zero, a log file) must not eat the memory.
const maxFileSize = 1 << 20

func readFile(path string) ([]byte, error) {
	data, err := readlimit.ReadFile(path, maxFileSize)
	if errors.Is(err, readlimit.ErrTooLarge) {
		return nil, fmt.Errorf("%w, not a configuration file", err)
	}
	return data, err
}

// Parse is Load on bytes already read; name labels messages and lookup resolves
// ${NAME}. A nil lookup leaves ${NAME} as written.
func Parse(name string, data []byte, lookup func(string) (string, bool)) (*Config, error) {
	cfg, err := parse(data, lookup)
	if err != nil {
		return nil, located(name, err)
	}
	return cfg, nil
}

func parse(data []byte, lookup func(string) (string, bool)) (*Config, error) {
	expanded := data
	if lookup != nil {
		var err error
		if expanded, err = expandEnv(data, lookup); err != nil {
			return nil, err
		}
	}
	expanded = zeroDurations(expanded)
	cfg := Default()
	// First pass, strict: unknown keys and malformed values, with their lines.
	dec := yaml.NewDecoder(bytes.NewReader(expanded))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("empty configuration")
		}
		return nil, tabHint(expanded, decodeError(expanded, err))
	}
	if err := onlyOneDocument(dec); err != nil {
		return nil, decodeError(expanded, err)
	}
	// Second pass: yaml.v3 builds slice elements from zero values, so each
	// backend is decoded again over weighter.DefaultPolicy() to get its defaults.
	if err := decodeBackends(expanded, &cfg); err != nil {
		return nil, decodeError(expanded, err)
	}
	if err := cfg.Validate(); err != nil {
		return nil, locateKeys(expanded, err)
	}
	return &cfg, nil
}

// backendMsg splits "backends[1] (name): function ..." into 1 and "function ...".
var backendMsg = regexp.MustCompile(`^backends\[(\d+)\](?: \(.*?\))?: (.*)$`)

// locateKeys gives each problem the line of the key it names: a top-level one
// ("interval: must be positive") had none, a backend's one had the line where
// the backend starts rather than that of its bad key.
func locateKeys(data []byte, err error) error {
	var root yaml.Node
	if yaml.Unmarshal(data, &root) != nil || root.Kind != yaml.DocumentNode || len(root.Content) == 0 {
		return err
	}
	seq := backendsNode(&root)
	var out []error
	for _, e := range errs.Leaves(err) {
		var le *lineError
		if !errors.As(e, &le) {
			if line := keyLine(root.Content[0], e.Error()); line > 0 {
				e = &lineError{line: line, err: e}
			}
		} else if m := backendMsg.FindStringSubmatch(e.Error()); m != nil && seq != nil {
			if i, _ := strconv.Atoi(m[1]); i < len(seq.Content) {
				if line := keyLine(seq.Content[i], m[2]); line > 0 {
					e = &lineError{line: line, err: le.err}
				}
			}
		}
		out = append(out, e)
	}
	return errors.Join(out...)
}

// keyLine follows the keys a message starts with ("haproxy: socket is
// required") down the mappings and returns the line of the deepest one found.
func keyLine(node *yaml.Node, msg string) int {
	line := 0
	for node != nil && node.Kind == yaml.MappingNode {
		word, rest, _ := strings.Cut(msg, " ")
		word = strings.TrimSuffix(word, ":")
		var value *yaml.Node
		for i := 0; i+1 < len(node.Content); i += 2 {
			if node.Content[i].Value == word {
				line, value = node.Content[i].Line, node.Content[i+1]
				break
			}
		}
		node, msg = value, rest
	}
	return line
}

// tabHint names the tab behind yaml.v3's "found character that cannot start
// any token": it is invisible in most editors and in the message.
func tabHint(data []byte, err error) error {
	m := yamlLine.FindStringSubmatch(err.Error())
	if m == nil || m[2] != "found character that cannot start any token" {
		return err
	}
	n, _ := strconv.Atoi(m[1])
	lines := strings.Split(string(data), "\n")
	if n < 1 || n > len(lines) || !strings.Contains(lines[n-1], "\t") {
		return err
	}
	return &lineError{line: n, err: fmt.Errorf("%s (a tab: indent with spaces)", m[2])}
}

// onlyOneDocument rejects a further non-empty YAML document: Decode reads only
// the first, so the rest of a concatenated file would be dropped unseen.
func onlyOneDocument(dec *yaml.Decoder) error {
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if len(doc.Content) > 0 && doc.Content[0].Tag != "!!null" {
			return &lineError{line: doc.Line, err: errors.New("a second YAML document (after ---) is not read: keep the whole configuration in one document")}
		}
	}
}

// decodeBackends re-decodes every backend over the policy defaults and records its line.
func decodeBackends(data []byte, cfg *Config) error {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return err
	}
	seq := backendsNode(&root)
	if seq == nil {
		return nil
	}
	for i, item := range seq.Content {
		if i >= len(cfg.Backends) {
			break
		}
		b := Backend{Policy: weighter.DefaultPolicy(), Source: sourceDefaults(item)}
		if err := item.Decode(&b); err != nil {
			return err
		}
		b.line = item.Line
		cfg.Backends[i] = b
	}
	return nil
}

// sourceDefaults pre-fills the source a backend names with that source's
// defaults, so keys absent from the file keep them. It decodes the node rather
// than looking for the keys, so a source given through an alias or a merge key
// (<<: *base) gets its defaults too.
func sourceDefaults(backend *yaml.Node) Source {
	var probe struct {
		Source Source `yaml:"source"`
	}
	_ = backend.Decode(&probe) // the strict first pass has reported any error
	var s Source
	if probe.Source.Prometheus != nil {
		d := sources.DefaultPrometheusConfig()
		s.Prometheus = &d
	}
	if probe.Source.Graphite != nil {
		d := sources.DefaultGraphiteConfig()
		s.Graphite = &d
	}
	return s
}

// mappingValue returns the value under key in mapping node m, or nil.
func mappingValue(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// backendsNode finds the sequence under the top-level "backends" key.
func backendsNode(root *yaml.Node) *yaml.Node {
	if root.Kind != yaml.DocumentNode || len(root.Content) == 0 {
		return nil
	}
	if seq := mappingValue(root.Content[0], "backends"); seq != nil && seq.Kind == yaml.SequenceNode {
		return seq
	}
	return nil
}

var (
	envRef   = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)
	envStart = regexp.MustCompile(`\$\{[A-Za-z_][A-Za-z0-9_]*`) // envRef without its closing brace
)

// expandEnv replaces ${NAME} outside comments; an unset NAME is an error (a
// secret silently replaced by "" would only show up as a 401 much later).
// The expansion is textual but not blind: each reference's value is written
// the way its place in the YAML needs it (escaped inside "…", its quotes
// doubled inside '…'), and a value that would change the YAML's structure in
// an unquoted place (a newline, " #", ": ", a flow or tag character — a
// password like "p#ss, w0rd" would cut or split the value) is an error that
// says to quote the reference.
func expandEnv(data []byte, lookup func(string) (string, bool)) ([]byte, error) {
	lines := strings.SplitAfter(string(data), "\n")
	var problems []error
	for i, line := range lines {
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		if err := malformedRef(line); err != nil {
			problems = append(problems, &lineError{line: i + 1, err: err})
		}
		var out strings.Builder
		last := 0
		for _, loc := range envRef.FindAllStringSubmatchIndex(line, -1) {
			ctx := scalarContext(line[:loc[0]])
			if ctx.kind == inComment {
				break
			}
			name := line[loc[2]:loc[3]]
			v, ok := lookup(name)
			if !ok {
				problems = append(problems, &lineError{line: i + 1, err: fmt.Errorf("environment variable %s is not set", name)})
			}
			written, err := inContext(v, ctx)
			if err != nil {
				problems = append(problems, &lineError{line: i + 1, err: fmt.Errorf("environment variable %s %w: write the reference in quotes (key: \"${%s}\")", name, err, name)})
			}
			out.WriteString(line[last:loc[0]])
			out.WriteString(written)
			last = loc[1]
		}
		out.WriteString(line[last:])
		lines[i] = out.String()
	}
	return []byte(strings.Join(lines, "")), errors.Join(problems...)
}

// Where a reference stands in its line.
const (
	unquoted = iota
	inDoubleQuotes
	inSingleQuotes
	inComment
)

// place is where a reference stands: in a plain (unquoted) value, a "…" or
// '…' scalar, or a comment; for a plain value, whether inside a flow
// collection ({…} or […]) and whether at the start of the value.
type place struct {
	kind          int
	flow, atStart bool
}

// scalarContext reads the YAML line up to a reference and says where the
// reference stands. A quote opens a quoted scalar only where a scalar starts
// (line start, after ": ", "- ", "[", "{" or ","): the quote of "it's" inside
// a plain value is a character like any other.
func scalarContext(prefix string) place {
	p := place{kind: unquoted, atStart: true}
	depth := 0
	for i := 0; i < len(prefix); i++ {
		c := prefix[i]
		switch p.kind {
		case inDoubleQuotes:
			if c == '\\' {
				i++
			} else if c == '"' {
				p.kind = unquoted
			}
			continue
		case inSingleQuotes:
			if c == '\'' { // '' inside '…' closes and reopens: the same as an escaped quote
				p.kind = unquoted
			}
			continue
		}
		switch {
		case c == '#' && (i == 0 || prefix[i-1] == ' ' || prefix[i-1] == '\t'):
			p.kind = inComment
			return p
		case p.atStart && c == '"':
			p.kind, p.atStart = inDoubleQuotes, false
		case p.atStart && c == '\'':
			p.kind, p.atStart = inSingleQuotes, false
		case c == ' ' || c == '\t':
			// spaces keep a scalar start open
		case c == '[' || c == '{':
			depth, p.atStart = depth+1, true
		case (c == ']' || c == '}') && depth > 0:
			depth, p.atStart = depth-1, false
		case c == ',' && depth > 0:
			p.atStart = true
		case (c == ':' || c == '-') && i+1 < len(prefix) && (prefix[i+1] == ' ' || prefix[i+1] == '\t'):
			p.atStart = true
		default:
			p.atStart = false
		}
	}
	p.flow = depth > 0
	return p
}

// inContext returns v as it must be written at place p, or an error saying
// why it cannot be written there unquoted.
func inContext(v string, p place) (string, error) {
	switch p.kind {
	case inDoubleQuotes:
		q := strconv.Quote(v) // Go's escapes are YAML's: \" \\ \n \t \uXXXX
		return q[1 : len(q)-1], nil
	case inSingleQuotes:
		if strings.ContainsAny(v, "\n\r") {
			return v, errors.New("holds a line break, which '…' cannot keep")
		}
		return strings.ReplaceAll(v, "'", "''"), nil
	}
	syntax := errors.New("holds characters YAML reads as syntax in an unquoted value")
	switch {
	case strings.ContainsAny(v, "\n\r"):
		return v, errors.New("holds a line break")
	case strings.Contains(v, " #") || strings.Contains(v, "\t#") || strings.Contains(v, ": ") || strings.HasSuffix(v, ":"):
		return v, syntax // would start a comment or a mapping
	case p.flow && strings.ContainsAny(v, ",[]{}"):
		return v, syntax // would end the flow value
	case p.atStart && v != "" && (strings.ContainsRune(",[]{}#&*!|>'\"%@` \t", rune(v[0])) ||
		strings.ContainsRune("-?:", rune(v[0])) && (len(v) == 1 || v[1] == ' ' || v[1] == '\t')):
		return v, syntax // would start something else than a plain value
	case strings.TrimRight(v, " \t") != v:
		return v, errors.New("ends in spaces, which YAML drops from an unquoted value")
	}
	return v, nil
}

// malformedRef finds a ${NAME that is not closed right after the name (a typo,
// or a shell form like ${NAME:-default}): left as is, it would end up in a URL
// or a secret and fail much later, far from the cause. ${1} (PromQL's
// label_replace group) does not start a name and stays as written.
func malformedRef(line string) error {
	for _, loc := range envStart.FindAllStringIndex(line, -1) {
		end := loc[1]
		if end < len(line) && line[end] == '}' {
			continue
		}
		if end < len(line) && line[end] != '\n' && line[end] != '\r' {
			end++
		}
		return fmt.Errorf("%q is not a ${NAME} reference: unclosed, or a shell form like ${NAME:-default}, which is not supported", line[loc[0]:end])
	}
	return nil
}

// lineError is an error known to come from one line of the file.
type lineError struct {
	line int
	err  error
}

func (e *lineError) Error() string { return e.err.Error() }

func (e *lineError) Unwrap() error { return e.err }

var (
	yamlLine     = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)
	unknownField = regexp.MustCompile("^field (\\S+) not found in type \\S+$")
	badDuration  = regexp.MustCompile("^cannot unmarshal !!\\w+ `(.*)` into time\\.Duration$")
	quotedValue  = regexp.MustCompile(" `[^`]*`")
)

// located rewrites err as "name:line: message" lines, one per problem.
func located(name string, err error) error {
	var msgs []string
	var te *yaml.TypeError
	switch {
	case errors.As(err, &te):
		for _, m := range te.Errors {
			msgs = append(msgs, locateYAML(name, m))
		}
	default:
		for _, e := range errs.Leaves(err) {
			msgs = append(msgs, locateOne(name, e))
		}
	}
	return &Error{File: name, Msgs: msgs, err: err}
}

func locateOne(name string, err error) string {
	var le *lineError
	if errors.As(err, &le) && le.line > 0 {
		return fmt.Sprintf("%s:%d: %v", name, le.line, err)
	}
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		return locateYAML(name, err.Error())
	}
	return fmt.Sprintf("%s: %s", name, strings.TrimPrefix(err.Error(), "yaml: "))
}

// locateYAML turns yaml.v3's "line N: msg" into "name:N: msg" with plainer wording.
func locateYAML(name, msg string) string {
	m := yamlLine.FindStringSubmatch(msg)
	if m == nil {
		return fmt.Sprintf("%s: %s", name, strings.TrimPrefix(msg, "yaml: "))
	}
	line, _ := strconv.Atoi(m[1])
	text := m[2]
	if f := unknownField.FindStringSubmatch(text); f != nil {
		text = fmt.Sprintf("unknown key %q", f[1])
	} else if badDuration.MatchString(text) {
		text = "invalid duration (want e.g. 10s, 1m30s)"
	}
	// decodeError has rewritten the messages that quote a value; should one
	// get here all the same, the value is cut out rather than shown.
	text = quotedValue.ReplaceAllString(text, "")
	return fmt.Sprintf("%s:%d: %s", name, line, text)
}

// Error lists every problem found in a configuration, one "file:line: message" each.
type Error struct {
	File string
	Msgs []string
	err  error
}

func (e *Error) Error() string { return strings.Join(e.Msgs, "\n") }

func (e *Error) Unwrap() error { return e.err }
