package sourcekind_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/config"
	"github.com/haproxy-weighter/haproxy-weighter/sourcekind"
)

// kindUsers are the packages that decode, validate, build or describe a
// source, relative to this one: none may tell one kind from another.
var kindUsers = []string{"../config", "../cmd", "../daemon", "../assemble", "../sim", "../statuspage", "."}

// TestNoKindIsNamedOutsideItsFile: everything about a kind is in
// sourcekind/<kind>.go, so a kind is added by a file and a line in the
// registry. Outside that file, in the packages that use sources, no code
// switches on a kind or compares with one (a literal or a constant that
// spells its name), names its configuration's type, or spells its name
// (unless the name is also another key of the configuration, "haproxy" the
// socket's: then only a comparison with a source's Kind() is refused).
func TestNoKindIsNamedOutsideItsFile(t *testing.T) {
	kinds := map[string]bool{}
	types := map[string]string{} // "import/path.Type" → kind
	for _, k := range sourcekind.All() {
		kinds[k.Name()] = true
		typ := reflect.TypeOf(k.New()).Elem()
		types[typ.PkgPath()+"."+typ.Name()] = k.Name()
		_, err := os.Stat(k.Name() + ".go")
		assert.NoError(t, err, "kind %s: its file is sourcekind/%s.go", k.Name(), k.Name())
	}
	otherKeys := configKeys(reflect.TypeOf(config.Config{}), reflect.TypeOf(config.Backend{}))

	var files []string
	for _, dir := range kindUsers {
		found, err := filepath.Glob(filepath.Join(dir, "*.go"))
		require.NoError(t, err)
		for _, f := range found {
			if !strings.HasSuffix(f, "_test.go") {
				files = append(files, f)
			}
		}
	}
	require.NotEmpty(t, files)
	fset := token.NewFileSet()
	parsed := map[string]*ast.File{}
	consts := map[string]string{} // constant name → the kind it spells
	for _, f := range files {
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		parsed[f] = file
		for _, d := range file.Decls {
			if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.CONST {
				for _, s := range g.Specs {
					v := s.(*ast.ValueSpec)
					for i, val := range v.Values {
						if name := literal(val); kinds[name] {
							consts[v.Names[i].Name] = name
						}
					}
				}
			}
		}
	}
	spelt := func(e ast.Expr) string { // the kind e spells, as a literal or a constant
		switch e := e.(type) {
		case *ast.Ident:
			return consts[e.Name]
		case *ast.SelectorExpr:
			return consts[e.Sel.Name]
		}
		if name := literal(e); kinds[name] {
			return name
		}
		return ""
	}
	for f, file := range parsed {
		own := filepath.Dir(f) == "." && kinds[strings.TrimSuffix(filepath.Base(f), ".go")]
		ownKind := strings.TrimSuffix(filepath.Base(f), ".go")
		imports := map[string]string{} // name in the file → import path
		for _, imp := range file.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			name := filepath.Base(path)
			if imp.Name != nil {
				name = imp.Name.Name
			}
			imports[name] = path
		}
		refuse := func(n ast.Node, kind, what string) {
			if !(own && kind == ownKind) {
				t.Errorf("%s: %s kind %s outside sourcekind/%s.go", fset.Position(n.Pos()), what, kind, kind)
			}
		}
		compared := func(subject ast.Expr, against ...ast.Expr) {
			for _, e := range against {
				if kind := spelt(e); kind != "" && (!otherKeys[kind] || callsKind(subject)) {
					refuse(e, kind, "compares with")
				}
			}
		}
		ast.Inspect(file, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.SwitchStmt:
				for _, c := range n.Body.List {
					compared(n.Tag, c.(*ast.CaseClause).List...)
				}
			case *ast.BinaryExpr:
				if n.Op == token.EQL || n.Op == token.NEQ {
					compared(n.Y, n.X)
					compared(n.X, n.Y)
				}
			case *ast.BasicLit:
				if name := literal(n); kinds[name] && !otherKeys[name] {
					refuse(n, name, "spells")
				}
			case *ast.SelectorExpr:
				if x, ok := n.X.(*ast.Ident); ok {
					if kind, ok := types[imports[x.Name]+"."+n.Sel.Name]; ok {
						refuse(n, kind, "names the configuration of")
					}
				}
			}
			return true
		})
	}
}

// literal is the string e spells, or "".
func literal(e ast.Expr) string {
	if l, ok := e.(*ast.BasicLit); ok && l.Kind == token.STRING {
		s, _ := strconv.Unquote(l.Value)
		return s
	}
	return ""
}

// callsKind reports whether e calls a method Kind (a source's kind).
func callsKind(e ast.Expr) bool {
	found := false
	if e != nil {
		ast.Inspect(e, func(n ast.Node) bool {
			if c, ok := n.(*ast.CallExpr); ok {
				if s, ok := c.Fun.(*ast.SelectorExpr); ok && s.Sel.Name == "Kind" {
					found = true
				}
			}
			return !found
		})
	}
	return found
}

// configKeys are the YAML keys of the structs ts, the source's excepted.
func configKeys(ts ...reflect.Type) map[string]bool {
	keys := map[string]bool{}
	for _, t := range ts {
		for i := range t.NumField() {
			if name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ","); name != "" && name != "source" {
				keys[name] = true
			}
		}
	}
	return keys
}

// TestEveryKindIsComplete: each kind registered has a name of its own, a
// configuration with defaults, and a flag to choose it by (run without
// --config), and the registry finds it by its name.
func TestEveryKindIsComplete(t *testing.T) {
	seen := map[string]bool{}
	flags := map[string]bool{}
	for _, k := range sourcekind.All() {
		assert.NotEmpty(t, k.Name())
		assert.False(t, seen[k.Name()], "kind %s registered twice", k.Name())
		seen[k.Name()] = true
		assert.True(t, k.Accepts(k.New()), k.Name())
		assert.False(t, k.Accepts(nil), k.Name())
		if assert.NotEmpty(t, k.Flags(), "kind %s: no flag chooses it", k.Name()) {
			for _, f := range k.Flags() {
				assert.False(t, flags[f.Name], "flag --%s of two kinds", f.Name)
				flags[f.Name] = true
			}
		}
		got, ok := sourcekind.Lookup(k.Name())
		assert.True(t, ok)
		assert.Equal(t, k, got)
	}
	_, ok := sourcekind.Lookup("tock")
	assert.False(t, ok)
}
