package testenv

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// perPackage are the top-level names of test files that each package may
// define with the same body, and why: what go test or the package itself
// needs under that name, which no shared helper could replace.
var perPackage = map[string]string{
	"TestMain": "go test calls each package's own",
}

// TestNoHelperDefinedInTwoPackages: a test helper (a top-level function,
// method or type of a *_test.go file) written once more, name and body,
// in another package belongs in internal/testenv. A review found waitFor,
// newFakeClock, promData, assertNoSecret and weightsOf written in several
// packages, drifting apart.
func TestNoHelperDefinedInTwoPackages(t *testing.T) {
	dups, err := duplicateHelpers(moduleRoot(t))
	require.NoError(t, err)
	assert.Empty(t, dups, "helpers defined, name and body, in test files of two packages: move each into internal/testenv")
}

// The check finds a helper copied into a second package, also when only
// its comments and layout differ, and not one whose body differs, nor a
// method of a differently named type, nor what perPackage allows.
func TestDuplicateHelpersFound(t *testing.T) {
	root := t.TempDir()
	write := func(path, text string) {
		t.Helper()
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(root, path)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(root, path), []byte(text), 0o644))
	}
	write("a/a_test.go", `package a
// waitFor waits.
func waitFor(n int) int { return n + 1 }
type clock struct{ now int }
func (c *clock) tick() { c.now++ }
func differs() int { return 1 }
func TestMain(m *testing.M) { m.Run() }
`)
	write("b/b_test.go", `package b

func waitFor(n int) int {
	// the same, laid out otherwise
	return n + 1
}

type clock struct {
	now int
}

func (c *clock) tick() { c.now++ }
func differs() int { return 2 }
func TestMain(m *testing.M) { m.Run() }
`)
	write("b/b.go", "package b\n\nfunc notATest(n int) int { return n + 1 }\n")
	write("c/c_test.go", "package c\n\nfunc waitFor(n int) int { return n + 1 }\n\ntype other struct{ now int }\n\nfunc (c *other) tick() { c.now++ }\n")
	write("testdata/d_test.go", "package d\n\nfunc waitFor(n int) int { return n + 1 }\n")

	dups, err := duplicateHelpers(root)
	require.NoError(t, err)
	assert.Equal(t, []string{
		"clock.tick in a (a/a_test.go), b (b/b_test.go)",
		"type clock in a (a/a_test.go), b (b/b_test.go)",
		"waitFor in a (a/a_test.go), b (b/b_test.go), c (c/c_test.go)",
	}, dups)
}

// moduleRoot is the directory of the repository's go.mod.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	require.NoError(t, err)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		require.NotEqual(t, dir, parent, "no go.mod above the test's directory")
		dir = parent
	}
}

// helperDef is where one top-level declaration of a test file is.
type helperDef struct {
	pkg  string // directory and package name: a and a_test are two packages
	file string // path from the root
}

// duplicateHelpers lists the top-level declarations of the *_test.go files
// under root (testdata and hidden directories left out) that two or more
// packages define with the same name and the same body, comments and
// layout aside: one line per declaration, naming the packages and files.
func duplicateHelpers(root string) ([]string, error) {
	defs := map[string][]helperDef{} // by name and printed declaration
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		return addTestFile(defs, root, path)
	})
	if err != nil {
		return nil, err
	}
	var out []string
	for key, ds := range defs {
		pkgs := map[string]bool{}
		for _, d := range ds {
			pkgs[d.pkg] = true
		}
		if len(pkgs) < 2 {
			continue
		}
		where := make([]string, len(ds))
		for i, d := range ds {
			where[i] = fmt.Sprintf("%s (%s)", d.pkg, d.file)
		}
		sort.Strings(where)
		out = append(out, strings.SplitN(key, "\x00", 2)[0]+" in "+strings.Join(where, ", "))
	}
	slices.Sort(out)
	return out, nil
}

// addTestFile records path's top-level functions, methods and types.
func addTestFile(defs map[string][]helperDef, root, path string) error {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	if err != nil {
		return err
	}
	rel, err := filepath.Rel(root, path)
	if err != nil {
		return err
	}
	rel = filepath.ToSlash(rel)
	def := helperDef{pkg: f.Name.Name, file: rel}
	if dir := filepath.ToSlash(filepath.Dir(rel)); dir != "." {
		def.pkg = dir
		if f.Name.Name != filepath.Base(dir) {
			def.pkg += " (package " + f.Name.Name + ")"
		}
	}
	add := func(name string, node any) error {
		if _, ok := perPackage[name]; ok {
			return nil
		}
		var b bytes.Buffer
		// A fresh FileSet prints without the file's positions: the same
		// declaration laid out otherwise prints the same; comments are not
		// in the tree (parsed without them), so they do not count either.
		if err := printer.Fprint(&b, token.NewFileSet(), node); err != nil {
			return fmt.Errorf("%s: %s: %w", rel, name, err)
		}
		key := name + "\x00" + b.String()
		defs[key] = append(defs[key], def)
		return nil
	}
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if err := add(funcName(d), d); err != nil {
				return err
			}
		case *ast.GenDecl:
			if d.Tok != token.TYPE {
				continue
			}
			for _, spec := range d.Specs {
				ts := spec.(*ast.TypeSpec)
				if err := add("type "+ts.Name.Name, ts); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// funcName is a function's name, or Type.Method for a method.
func funcName(d *ast.FuncDecl) string {
	if d.Recv == nil || len(d.Recv.List) == 0 {
		return d.Name.Name
	}
	recv := d.Recv.List[0].Type
	if star, ok := recv.(*ast.StarExpr); ok {
		recv = star.X
	}
	if idx, ok := recv.(*ast.IndexExpr); ok { // a generic type's method
		recv = idx.X
	}
	if id, ok := recv.(*ast.Ident); ok {
		return id.Name + "." + d.Name.Name
	}
	return d.Name.Name
}
