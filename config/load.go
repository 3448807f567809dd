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

// maxFileSize bounds what Load reads: a configuration is a few KiB, and a
// wrong path (/dev/zero, a log file) must not eat the memory.
const maxFileSize = 1 << 20

// Load reads, expands, decodes and validates the configuration file at path.
// ${NAME} in the file is replaced by the environment variable NAME.
func Load(path string) (*Config, error) {
	data, err := readlimit.ReadFile(path, maxFileSize)
	if errors.Is(err, readlimit.ErrTooLarge) {
		err = fmt.Errorf("%w, not a configuration file", err)
	}
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return Parse(path, data, os.LookupEnv)
}

// Parse is Load on bytes already read; name labels messages and lookup resolves
// ${NAME}. A nil lookup leaves ${NAME} as written.
func Parse(name string, data []byte, lookup func(string) (string, bool)) (*Config, error) {
	cfg, root, err := parse(data, lookup)
	if err != nil {
		return nil, located(name, root, err)
	}
	finishLoad(name, root, cfg)
	return cfg, nil
}

// parse returns the configuration, or its problems, and the tree that gives
// problems and warnings their lines.
func parse(data []byte, lookup func(string) (string, bool)) (*Config, *yaml.Node, error) {
	var err error
	if lookup != nil {
		if data, err = expandEnv(data, lookup); err != nil {
			return nil, nil, err
		}
	}
	doc := document{cfg: Default()}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true) // an unknown key is a typo, refused with its line
	if err = dec.Decode(&doc); errors.Is(err, io.EOF) {
		return nil, nil, errors.New("empty configuration")
	} else if err == nil {
		err = onlyOneDocument(dec)
	}
	if err != nil {
		return nil, nil, decodeError(data, doc.root.node, err)
	}
	if err := doc.cfg.Validate(); err != nil {
		return nil, doc.root.node, err
	}
	return &doc.cfg, doc.root.node, nil
}

// document is the file: the node tree, kept to give problems their lines,
// and the configuration decoded from it. UnmarshalYAML takes unmarshal
// (rather than a node) because that decodes with the decoder's own
// strictness, which Node.Decode drops.
type document struct {
	root nodeRef
	cfg  Config
}

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

// onlyOneDocument rejects a further non-empty YAML document: Decode reads only
// the first, so the rest of a concatenated file would be dropped unseen.
func onlyOneDocument(dec *yaml.Decoder) error {
	for {
		var doc yaml.Node
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return err
		}
		if len(doc.Content) > 0 && doc.Content[0].Tag != "!!null" {
			return &FieldError{Line: doc.Line, Err: errors.New("a second YAML document (after ---) is not read: keep the whole configuration in one document")}
		}
	}
}

// located writes each problem of err as "name:line: message", or "name:
// message" when it has no line; a problem without one yet gets the line of
// its path in the tree root.
func located(name string, root *yaml.Node, err error) error {
	var msgs []string
	for _, e := range errs.Leaves(err) {
		fe := (*FieldError)(nil)
		if errors.As(e, &fe) && fe.Line == 0 {
			fe.Line = lineOf(root, fe.keys)
		}
		if fe != nil && fe.Line > 0 {
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
