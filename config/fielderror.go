package config

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/haproxy-weighter/haproxy-weighter/internal/errs"
	"github.com/haproxy-weighter/haproxy-weighter/internal/field"
)

// FieldError is a problem of the configuration at one key.
type FieldError struct {
	// Path is where in the configuration: "interval", "backends[1].source.prometheus.query".
	Path string
	// Line is the line in the file of the deepest key of Path written there;
	// 0 when unknown (flags, or a problem of the whole file).
	Line int
	// Err says what is wrong, starting with the key ("query: must be set").
	Err error

	keys   []any  // Path's parts: mapping keys (string) and list indexes (int)
	within string // the backend's label ("backends[1] (be_ingest)"), shown before Err
}

func (e *FieldError) Error() string {
	if e.within != "" {
		return e.within + ": " + e.Err.Error()
	}
	return e.Err.Error()
}

func (e *FieldError) Unwrap() error { return e.Err }

// keyed returns the problems of err at keys, one FieldError per problem
// errors.Join put in it; nil has none. A problem that a validator outside
// this package (a policy, a socket, an IPVS service, a source kind) keyed
// with a field.Error is further down, at the key it names.
func keyed(err error, keys ...any) (problems []*FieldError) {
	for _, leaf := range errs.Leaves(err) {
		if leaf != nil {
			p := &FieldError{Err: leaf, keys: slices.Clone(keys)}
			for _, k := range field.Keys(leaf) {
				p.keys = append(p.keys, k)
			}
			problems = append(problems, p)
		}
	}
	return problems
}

// joinFields joins problems after giving each its Path.
func joinFields(problems []*FieldError) error {
	out := make([]error, len(problems))
	for i, p := range problems {
		var path strings.Builder
		for _, k := range p.keys {
			if n, ok := k.(int); ok {
				fmt.Fprintf(&path, "[%d]", n)
			} else {
				fmt.Fprintf(&path, ".%s", k)
			}
		}
		p.Path, out[i] = strings.TrimPrefix(path.String(), "."), p
	}
	return errors.Join(out...)
}

// lineOf follows keys down the tree and returns the line of the deepest one
// written (a missing key has the line of the mapping it is missing from).
// Only keys written in a mapping are followed: a problem of a key a merge
// brings in (<<: *base) stays at the mapping that merges it.
func lineOf(n *yaml.Node, keys []any) (line int) {
	for _, k := range keys {
		for n != nil && n.Kind == yaml.AliasNode {
			n = n.Alias
		}
		var next *yaml.Node
		switch i, isIndex := k.(int); {
		case n == nil:
		case isIndex && n.Kind == yaml.SequenceNode && i < len(n.Content):
			next, line = n.Content[i], n.Content[i].Line
		case n.Kind == yaml.MappingNode:
			for j := 0; j+1 < len(n.Content); j += 2 {
				if n.Content[j].Value == k {
					next, line = n.Content[j+1], n.Content[j].Line
					break
				}
			}
		}
		n = next
	}
	return line
}
