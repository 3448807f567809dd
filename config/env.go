package config

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

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
			problems = append(problems, &FieldError{Line: i + 1, Err: err})
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
				problems = append(problems, &FieldError{Line: i + 1, Err: fmt.Errorf("environment variable %s is not set", name)})
			}
			written, err := inContext(v, ctx)
			if err != nil {
				problems = append(problems, &FieldError{Line: i + 1, Err: fmt.Errorf("environment variable %s %w: write the reference in quotes (key: \"${%s}\")", name, err, name)})
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
