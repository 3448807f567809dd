package config

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// yaml.v3 quotes the value that failed to decode: whole in "cannot decode
// !!str `…` as a !!int" (an explicit tag the value does not fit), its first 7
// characters in "cannot unmarshal !!str `…` into int". A password or token
// written with a wrong tag or under the wrong key would end up in validate's
// output, the daemon's log and a reload's error. These patterns pick those
// errors apart so that decodeError can rewrite them with the key and the line
// and without the value.
var (
	typeMismatch = regexp.MustCompile("^line (\\d+): cannot unmarshal (!!\\w+)(?: `(.*)`)? into (.+)$")
	badTagged    = regexp.MustCompile("^(?:yaml: )?cannot decode (!!\\w+) `(?s:(.*))` as a (!!\\w+)$")
	badBinary    = regexp.MustCompile(`^(?:yaml: )?!!binary value contains invalid base64 data$`)
	badAlias     = regexp.MustCompile(`^(?:yaml: )?unknown anchor '(?s:(.*))' referenced$`)
	badMapKey    = regexp.MustCompile(`^(?:yaml: )?invalid map key: `)
	yamlLine     = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)
	unknownField = regexp.MustCompile("^field (\\S+) not found in type .+$")
	quotedValue  = regexp.MustCompile(" `[^`]*`")
)

// decodeError rewrites an error of yaml.v3 decoding data as FieldErrors at
// their lines, so that no value of the file shows in it: each problem names
// its key instead. The original error is not wrapped, as it holds the value.
// root is the tree the decoder built, nil when the text did not parse.
func decodeError(data []byte, root *yaml.Node, err error) error {
	if fe := (*FieldError)(nil); errors.As(err, &fe) {
		return err // ours, already at its line
	}
	if ue := (*url.Error)(nil); errors.As(err, &ue) {
		// prometheus/common's URL (proxy_url) fails with url.Parse's error,
		// which quotes the whole value, a proxy's password in it too.
		return located1(root, 0, fmt.Sprintf("not a valid URL: %v", ue.Err), func(n *yaml.Node) bool {
			return n.Kind == yaml.ScalarNode && n.Value == ue.URL
		})
	}
	var te *yaml.TypeError
	if errors.As(err, &te) {
		var out []error
		for _, msg := range te.Errors {
			out = append(out, typeError(data, root, msg))
		}
		return errors.Join(out...)
	}
	msg := err.Error()
	switch {
	case badTagged.MatchString(msg):
		m := badTagged.FindStringSubmatch(msg)
		tag, value := m[3], m[2]
		text := fmt.Sprintf("not a valid %s (the tag asks for one)", tag)
		return located1(root, 0, text, func(n *yaml.Node) bool {
			return n.Kind == yaml.ScalarNode && n.ShortTag() == tag && n.Value == value
		})
	case badBinary.MatchString(msg):
		return located1(root, 0, "!!binary value contains invalid base64 data", func(n *yaml.Node) bool {
			if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!binary" {
				return false
			}
			_, err := base64.StdEncoding.DecodeString(n.Value)
			return err != nil
		})
	case badAlias.MatchString(msg):
		// The parser fails before there is a tree, so the alias is looked for
		// in the text. Its name is left out too: `password: *secret`, a
		// password starting with * written unquoted, is read as an alias.
		text := errors.New("an alias (*name) refers to an anchor (&name) that is not defined: quote a value that starts with *")
		if line := aliasLine(data, badAlias.FindStringSubmatch(msg)[1]); line > 0 {
			return &FieldError{Line: line, Err: text}
		}
		return text
	case badMapKey.MatchString(msg):
		return errors.New("invalid map key: a list or a mapping cannot be a key")
	}
	if root != nil {
		if fe := promCheckLine(root, err); fe != nil {
			return fe
		}
	}
	return yamlMessage(data, msg)
}

// yamlMessage turns one of yaml.v3's messages that hold no value ("line 3:
// field x not found in type …", a syntax error) into a FieldError at its
// line, in plainer words.
func yamlMessage(data []byte, msg string) error {
	m := yamlLine.FindStringSubmatch(msg)
	if m == nil {
		return errors.New(strings.TrimPrefix(msg, "yaml: "))
	}
	line, _ := strconv.Atoi(m[1])
	text := m[2]
	lines := strings.Split(string(data), "\n")
	if f := unknownField.FindStringSubmatch(text); f != nil {
		text = fmt.Sprintf("unknown key %q", f[1])
	} else if text == "found character that cannot start any token" && line >= 1 && line <= len(lines) && strings.Contains(lines[line-1], "\t") {
		text += " (a tab: indent with spaces)" // invisible in most editors and in the message
	}
	// The messages that quote a value are rewritten above; should one get
	// here all the same, the value is cut out rather than shown.
	return &FieldError{Line: line, Err: errors.New(quotedValue.ReplaceAllString(text, ""))}
}

// typeError rewrites one of yaml.v3's "line N: cannot unmarshal …" messages;
// others ("field x not found", "mapping key already defined") name keys, not
// values.
func typeError(data []byte, root *yaml.Node, msg string) error {
	m := typeMismatch.FindStringSubmatch(msg)
	if m == nil {
		return yamlMessage(data, msg)
	}
	line, _ := strconv.Atoi(m[1])
	tag, value, into := m[2], m[3], m[4]
	match := func(n *yaml.Node) bool {
		return n.Line == line && n.ShortTag() == tag && (value == "" || shortened(n.Value) == value)
	}
	want := goKind(into)
	if into == promPlain && root != nil {
		key, _ := findNode(root, "", match)
		want = promPlainKind(key)
	}
	text := fmt.Sprintf("want %s, got %s", want, tagKind(tag))
	if into == "time.Duration" {
		text = "invalid duration (want e.g. 10s, 1m30s)"
	}
	return located1(root, line, text, match)
}

// located1 finds the node match accepts and returns text as an error of its
// line, prefixed with its key; without a node, text at line, or alone when
// line is 0 (unknown).
func located1(root *yaml.Node, line int, text string, match func(*yaml.Node) bool) error {
	key := ""
	if root != nil {
		if k, l := findNode(root, "", match); l > 0 {
			key, line = k, l
		}
	}
	switch {
	case line == 0:
		return errors.New(text)
	case key == "":
		return &FieldError{Line: line, Err: errors.New(text)}
	}
	return &FieldError{Line: line, Err: fmt.Errorf("%s: %s", key, text)}
}

// findNode walks the tree for the first node match accepts and returns the
// mapping key it stands under (for a list item, the list's key) and its line.
// Aliases are not followed: the node they point to is found where it is
// defined, which is also the line yaml.v3 reports.
func findNode(n *yaml.Node, key string, match func(*yaml.Node) bool) (string, int) {
	if match(n) {
		return key, n.Line
	}
	switch n.Kind {
	case yaml.SequenceNode:
		for _, c := range n.Content {
			if k, line := findNode(c, key, match); line > 0 {
				return k, line
			}
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if k, line := findNode(n.Content[i+1], n.Content[i].Value, match); line > 0 {
				return k, line
			}
		}
	}
	return "", 0
}

// shortened is how yaml.v3 quotes a value in a type error.
func shortened(v string) string {
	if len(v) > 10 {
		return v[:7] + "..."
	}
	return v
}

// aliasLine is the first line, outside comments, where *name stands as an alias.
func aliasLine(data []byte, name string) int {
	ref := "*" + name
	for i, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		for rest := line; ; {
			j := strings.Index(rest, ref)
			if j < 0 {
				break
			}
			end := j + len(ref)
			if end == len(rest) || strings.ContainsRune(" \t\r,]}", rune(rest[end])) {
				return i + 1
			}
			rest = rest[end:]
		}
	}
	return 0
}

// goKind says in words what a Go type takes in YAML.
func goKind(t string) string {
	switch {
	case strings.HasPrefix(t, "[]"):
		return "a list"
	case strings.HasPrefix(t, "map["):
		return "a mapping"
	case strings.HasPrefix(t, "int"), strings.HasPrefix(t, "uint"):
		return "an integer"
	case strings.HasPrefix(t, "float"):
		return "a number"
	case t == "string":
		return "a string"
	case t == "bool":
		return "true or false"
	case strings.Contains(t, "."): // a struct of this module
		return "a mapping"
	}
	return t
}

// tagKind says in words what a YAML tag is.
func tagKind(tag string) string {
	if k, ok := map[string]string{
		"!!str": "a string", "!!int": "an integer", "!!float": "a number", "!!bool": "true or false",
		"!!seq": "a list", "!!map": "a mapping", "!!null": "null", "!!timestamp": "a timestamp",
		"!!binary": "binary data",
	}[tag]; ok {
		return k
	}
	return tag
}
