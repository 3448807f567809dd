package assemble

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNoHandMadeAssembly: the daemon and the simulator assemble their
// backends here and nowhere else. Either making a controller, a fresh
// pipeline, a shedder or a weighter.Weigher itself (or the fresh pipeline's
// configuration from the settings) is an assembly by hand, which the
// simulator's figures would then no longer measure.
func TestNoHandMadeAssembly(t *testing.T) {
	forbidden := map[string]bool{"NewController": true, "NewFresh": true, "NewShedder": true, "NewPinner": true}
	for _, dir := range []string{"../daemon", "../sim"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		require.NoError(t, err)
		require.NotEmpty(t, files, dir)
		for _, name := range files {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			file, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
			require.NoError(t, err)
			ast.Inspect(file, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.SelectorExpr:
					if id, ok := n.X.(*ast.Ident); ok && id.Name == "weighter" && forbidden[n.Sel.Name] {
						t.Errorf("%s: calls weighter.%s: a backend assembled by hand", name, n.Sel.Name)
					}
				case *ast.CallExpr:
					if sel, ok := n.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "FreshSettings" {
						t.Errorf("%s: calls .FreshSettings(): a fresh pipeline configured by hand", name)
					}
				case *ast.CompositeLit:
					if sel, ok := n.Type.(*ast.SelectorExpr); ok && sel.Sel.Name == "Weigher" {
						if id, ok := sel.X.(*ast.Ident); ok && id.Name == "weighter" {
							t.Errorf("%s: builds a weighter.Weigher by hand", name)
						}
					}
				}
				return true
			})
		}
	}
}

// TestDaemonAndSimulatorImportIt: the check anyone can run (go list) finds
// this package among the daemon's and the simulator's imports.
func TestDaemonAndSimulatorImportIt(t *testing.T) {
	for _, pkg := range []string{"../daemon", "../sim"} {
		out, err := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, pkg).Output()
		require.NoError(t, err, pkg)
		assert.True(t, slices.Contains(strings.Fields(string(out)), "github.com/haproxy-weighter/haproxy-weighter/assemble"),
			"%s does not import assemble", pkg)
	}
}
