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

func fieldErr(err error, keys ...any) *FieldError {
	return &FieldError{Err: err, keys: keys}
}

// keyed turns the problems a validator outside this package reports (a
// policy, a socket, an IPVS service, a source kind) into FieldErrors at keys,
// each further down at the key its field.Error names.
func keyed(err error, keys ...any) []*FieldError {
	if err == nil {
		return nil
	}
	var out []*FieldError
	for _, leaf := range errs.Leaves(err) {
		path := slices.Clone(keys)
		for _, k := range field.Keys(leaf) {
			path = append(path, k)
		}
		out = append(out, fieldErr(leaf, path...))
	}
	return out
}

// joinFields joins problems after giving each its Path.
func joinFields(problems []*FieldError) error {
	var out []error
	for _, p := range problems {
		var b strings.Builder
		for _, k := range p.keys {
			if i, ok := k.(int); ok {
				fmt.Fprintf(&b, "[%d]", i)
			} else if b.Len() > 0 {
				fmt.Fprintf(&b, ".%s", k)
			} else {
				b.WriteString(k.(string))
			}
		}
		p.Path = b.String()
		out = append(out, p)
	}
	return errors.Join(out...)
}

// locate gives each FieldError of err the line of its path in the tree.
func locate(root *yaml.Node, err error) error {
	for _, leaf := range errs.Leaves(err) {
		var fe *FieldError
		if errors.As(leaf, &fe) && fe.Line == 0 {
			fe.Line = lineOf(root, fe.keys)
		}
	}
	return err
}

// lineOf follows keys down the tree and returns the line of the deepest one
// written (a missing key has the line of the mapping it is missing from).
func lineOf(n *yaml.Node, keys []any) int {
	line := 0
	if n == nil {
		return 0
	}
	for _, k := range keys {
		var next *yaml.Node
		if i, ok := k.(int); ok {
			if n = resolve(n); n.Kind == yaml.SequenceNode && i < len(n.Content) {
				next = n.Content[i]
				line = next.Line
			}
		} else if n = resolve(n); n.Kind == yaml.MappingNode {
			// Keys written here only: a problem of a key a merge brings in
			// (<<: *base) stays at the mapping that merges it, not in the base.
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == k {
					next, line = n.Content[i+1], n.Content[i].Line
					break
				}
			}
		}
		if next == nil {
			break
		}
		n = next
	}
	return line
}
