package examples

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// logCall is one log call of the daemon's code: its messages and where.
type logCall struct {
	msgs []string // the literal, or each literal a local variable is set to; none when neither
	pos  string   // file:line
	src  string   // the message expression as written, when not a literal
}

// slogMethods are the methods of *slog.Logger (and functions of package
// slog) that log, with the index of their message argument.
var slogMethods = map[string]int{
	"Debug": 0, "Info": 0, "Warn": 0, "Error": 0,
	"DebugContext": 1, "InfoContext": 1, "WarnContext": 1, "ErrorContext": 1,
	"Log": 2, "LogAttrs": 2,
}

// loggerName: a receiver that is a logger. The code names its loggers log
// (d.log, log, n.Log, logger); a call of a logging method on anything else
// is reported, so that a logger under another name is not skipped silently.
var loggerName = regexp.MustCompile(`^(log|Log|logger|slog)$`)

// logScanSkip are the trees that are not the daemon: tests' helpers, the
// examples, tools and test data.
var logScanSkip = []string{"examples", "e2e", "tools", "testdata", "internal", "sim", ".git"}

// logCalls returns every log call of the module's non-test Go files outside
// logScanSkip: the *slog.Logger methods and the cycle log's ln.add(level,
// msg, …), whose message names the cycle's one line.
func logCalls(t *testing.T, root string) []logCall {
	t.Helper()
	var calls []logCall
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if slices.Contains(logScanSkip, rel) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			recv := lastName(sel.X)
			idx, isLog := slogMethods[sel.Sel.Name]
			switch {
			case sel.Sel.Name == "add" && recv == "ln":
				idx = 1
			case isLog && loggerName.MatchString(recv):
			case isLog && sel.Sel.Name != "Error" && len(call.Args) > idx && !isIdent(sel.X, "http", "t", "b"):
				t.Errorf("%s: %s.%s: a logging method on a receiver not named log: name the logger log, or teach this test",
					fset.Position(call.Pos()), recv, sel.Sel.Name)
				return true
			default:
				return true
			}
			if len(call.Args) <= idx {
				return true
			}
			c := logCall{pos: rel + ":" + strconv.Itoa(fset.Position(call.Pos()).Line)}
			if lit, ok := call.Args[idx].(*ast.BasicLit); ok && lit.Kind == token.STRING {
				msg, _ := strconv.Unquote(lit.Value)
				c.msgs = []string{msg}
			} else {
				c.src = exprText(call.Args[idx])
				if id, ok := call.Args[idx].(*ast.Ident); ok {
					c.msgs = literalValues(f, id)
				}
			}
			calls = append(calls, c)
			return true
		})
		return nil
	})
	require.NoError(t, err)
	return calls
}

// literalValues returns the string literals a local variable is set to
// (msg := "a"; if … { msg = "b" }), or nil when it is ever set to anything
// else or is not a local variable (a parameter, say).
func literalValues(f *ast.File, id *ast.Ident) []string {
	obj := id.Obj
	if obj == nil || obj.Kind != ast.Var {
		return nil
	}
	if _, ok := obj.Decl.(*ast.AssignStmt); !ok {
		return nil
	}
	var vals []string
	ok := true
	ast.Inspect(f, func(n ast.Node) bool {
		as, isAssign := n.(*ast.AssignStmt)
		if !isAssign {
			return true
		}
		for i, lhs := range as.Lhs {
			l, isIdent := lhs.(*ast.Ident)
			if !isIdent || l.Obj != obj {
				continue
			}
			lit, isLit := as.Rhs[min(i, len(as.Rhs)-1)].(*ast.BasicLit)
			if len(as.Lhs) != len(as.Rhs) || !isLit || lit.Kind != token.STRING {
				ok = false
				continue
			}
			v, _ := strconv.Unquote(lit.Value)
			vals = append(vals, v)
		}
		return true
	})
	if !ok {
		return nil
	}
	return vals
}

func lastName(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.SelectorExpr:
		return x.Sel.Name
	}
	return ""
}

func isIdent(e ast.Expr, names ...string) bool {
	id, ok := e.(*ast.Ident)
	return ok && slices.Contains(names, id.Name)
}

func exprText(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.SelectorExpr:
		return exprText(x.X) + "." + x.Sel.Name
	case *ast.BinaryExpr:
		return exprText(x.X) + " " + x.Op.String() + " " + exprText(x.Y)
	case *ast.CallExpr:
		return exprText(x.Fun) + "(…)"
	case *ast.BasicLit:
		return x.Value
	}
	return "…"
}

// TestLogMessagesAreFixed: log pipelines group lines by their message, so
// a message is a short fixed phrase, a string literal, with no variable
// part and no clause after ';' or ':' or in parentheses: what it means,
// why and what comes next go into keys. A message is a string literal, or a
// local variable set only to string literals (one of a few fixed messages);
// the one exception is the cycle log's line, which logs the message the
// first ln.add gave it (each ln.add is checked).
func TestLogMessagesAreFixed(t *testing.T) {
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	calls := logCalls(t, root)
	require.Greater(t, len(calls), 50, "the scan finds the daemon's log calls")
	for _, c := range calls {
		if c.src == "ln.msg" && strings.HasPrefix(c.pos, "daemon/cyclelog.go:") {
			continue
		}
		if len(c.msgs) == 0 {
			t.Errorf("%s: log message %s is not a string literal: log a fixed message, details in keys", c.pos, c.src)
		}
		for _, msg := range c.msgs {
			switch {
			case strings.ContainsAny(msg, ";:()"):
				t.Errorf("%s: log message %q has a clause (';', ':' or parentheses): put it in a key", c.pos, msg)
			case msg == "" || len(msg) > 60:
				t.Errorf("%s: log message %q: a short fixed phrase (at most 60 bytes)", c.pos, msg)
			}
		}
	}
}

// logTableMessages are the messages of docs/operations.md's table of log
// lines: the first cell's `…` of each row of the "Logs" section.
func logTableMessages(t *testing.T, root string) map[string]bool {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(root, "docs", "operations.md"))
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(doc), "\n## Logs\n")
	require.True(t, ok, "docs/operations.md has a ## Logs section")
	section, _, _ = strings.Cut(section, "\n## ")
	msgs := map[string]bool{}
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cell := strings.SplitN(line, "|", 3)[1]
		for i, part := range strings.Split(cell, "`") {
			if i%2 == 1 {
				msgs[part] = true
			}
		}
	}
	return msgs
}

// TestLogMessagesDocumented: every message the code logs is a row of the
// table in docs/operations.md "Logs", the one place they are documented,
// and every row is a message the code logs.
func TestLogMessagesDocumented(t *testing.T) {
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	table := logTableMessages(t, root)
	inCode := map[string]bool{}
	for _, c := range logCalls(t, root) {
		for _, msg := range c.msgs {
			inCode[msg] = true
			if !table[msg] {
				t.Errorf("%s: log message %q is not in docs/operations.md's table of log messages", c.pos, msg)
			}
		}
	}
	for msg := range table {
		if !inCode[msg] {
			t.Errorf("docs/operations.md's table of log messages has %q, which no log call logs", msg)
		}
	}
}
