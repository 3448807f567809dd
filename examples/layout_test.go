package examples

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLayoutListsEveryPackage: docs/layout.md, the map of which package does
// one job, names every package `go list ./...` finds (as `dir/`), and every
// directory it names exists, so the map cannot drift from the tree.
func TestLayoutListsEveryPackage(t *testing.T) {
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	layout, err := os.ReadFile(filepath.Join(root, "docs", "layout.md"))
	require.NoError(t, err)
	cmd := exec.Command("go", "list", "-f", "{{.Dir}}", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	require.NoError(t, err, "go list ./... (the go tool must be on PATH)")
	dirs := strings.Fields(string(out))
	require.NotEmpty(t, dirs)
	for _, dir := range dirs {
		rel, err := filepath.Rel(root, dir)
		require.NoError(t, err)
		if !strings.Contains(string(layout), "`"+filepath.ToSlash(rel)+"/`") {
			t.Errorf("docs/layout.md does not name package directory `%s/`", rel)
		}
	}
	for _, line := range strings.Split(string(layout), "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cell := strings.SplitN(line, "|", 3)[1]
		for _, f := range strings.Split(cell, "`") {
			if !strings.HasSuffix(f, "/") || strings.ContainsAny(f, " ,") {
				continue
			}
			if _, err := os.Stat(filepath.Join(root, f)); err != nil {
				t.Errorf("docs/layout.md names %s, which does not exist", f)
			}
		}
	}
}
