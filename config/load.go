package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/haproxy-weighter/haproxy-weighter/internal/errs"
	"github.com/haproxy-weighter/haproxy-weighter/internal/readlimit"
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
	finishLoad(name, cfg)
	return cfg, nil
}

func parse(data []byte, lookup func(string) (string, bool)) (*Config, error) {
	if lookup != nil {
		var err error
		if data, err = expandEnv(data, lookup); err != nil {
			return nil, err
		}
	}
	doc := document{cfg: Default()}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true) // an unknown key is a typo, refused with its line
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("empty configuration")
		}
		return nil, decodeError(data, err)
	}
	if err := onlyOneDocument(dec); err != nil {
		return nil, decodeError(data, err)
	}
	if err := doc.cfg.Validate(); err != nil {
		return nil, locate(doc.root.node, err)
	}
	doc.cfg.warnings = deprecations(doc.root.node, &doc.cfg)
	return &doc.cfg, nil
}

// document is the file: the node tree, kept to give problems their lines,
// and the configuration decoded from it.
type document struct {
	root nodeRef
	cfg  Config
}

// UnmarshalYAML keeps the tree and decodes it. It takes unmarshal (rather
// than a node) because that decodes with the decoder's own strictness, which
// Node.Decode drops.
func (d *document) UnmarshalYAML(unmarshal func(any) error) error {
	if err := unmarshal(&d.root); err != nil {
		return err
	}
	return unmarshal(&d.cfg)
}

// nodeRef takes hold of the node it is decoded from. Within an UnmarshalYAML
// that takes unmarshal, decoding into a yaml.Node itself would decode the
// mapping into the Node struct's fields.
type nodeRef struct{ node *yaml.Node }

func (r *nodeRef) UnmarshalYAML(n *yaml.Node) error {
	r.node = n
	return nil
}

// pairs lists a mapping's keys and values, those a merge key (<<: *base)
// brings in last: a key written beside the merge wins, as in the decoder.
func pairs(n *yaml.Node) [][2]*yaml.Node {
	n = resolve(n)
	if n.Kind != yaml.MappingNode {
		return nil
	}
	var own, merged [][2]*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], resolve(n.Content[i+1])
		switch {
		case k.ShortTag() != "!!merge":
			own = append(own, [2]*yaml.Node{k, n.Content[i+1]})
		case v.Kind == yaml.SequenceNode:
			for _, c := range v.Content {
				merged = append(merged, pairs(c)...)
			}
		default:
			merged = append(merged, pairs(v)...)
		}
	}
	return append(own, merged...)
}

func resolve(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
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
			return &FieldError{Line: doc.Line, Err: errors.New("a second YAML document (after ---) is not read: keep the whole configuration in one document")}
		}
	}
}

// located writes each problem of err as "name:line: message", or "name:
// message" when it has no line.
func located(name string, err error) error {
	var msgs []string
	for _, e := range errs.Leaves(err) {
		if fe := (*FieldError)(nil); errors.As(e, &fe) && fe.Line > 0 {
			msgs = append(msgs, fmt.Sprintf("%s:%d: %v", name, fe.Line, e))
		} else {
			msgs = append(msgs, fmt.Sprintf("%s: %v", name, e))
		}
	}
	return &Error{File: name, Msgs: msgs, err: err}
}

// Error lists every problem found in a configuration, one "file:line: message" each.
type Error struct {
	File string
	Msgs []string
	err  error
}

func (e *Error) Error() string { return strings.Join(e.Msgs, "\n") }

func (e *Error) Unwrap() error { return e.err }
