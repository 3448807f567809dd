package cmd

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNoCommandGlobals: both binaries build their command trees afresh
// (NewRoot, newRootCmd), so no command, flag value or init() registration
// lives in a package variable, where one run's flags leaked into the next.
func TestNoCommandGlobals(t *testing.T) {
	for _, dir := range []string{".", "haproxy-weighter-sim", "internal/cli"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		require.NoError(t, err)
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
			require.NoError(t, err)
			for _, d := range f.Decls {
				switch d := d.(type) {
				case *ast.FuncDecl:
					assert.NotEqual(t, "init", d.Name.Name, "%s: init() registers into package state", path)
				case *ast.GenDecl:
					if d.Tok != token.VAR {
						continue
					}
					for _, spec := range d.Specs {
						for _, name := range spec.(*ast.ValueSpec).Names {
							// The version stamps -ldflags -X sets are the only package variables.
							assert.Contains(t, []string{"Version", "version"}, name.Name, "%s: package variable %s", path, name.Name)
						}
					}
				}
			}
		}
	}
	// Two trees are two: a flag given to one is not set in the next.
	first := NewRoot(io.Discard, io.Discard)
	first.SetArgs([]string{"calc", "--limiting-factor", "9", "--", "1"})
	require.NoError(t, first.Execute())
	c, _, err := NewRoot(io.Discard, io.Discard).Find([]string{"calc"})
	require.NoError(t, err)
	assert.Equal(t, "4", c.Flags().Lookup("limiting-factor").Value.String())
}
