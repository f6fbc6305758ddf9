package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// heavyAtInit are calls that must not run in a package-level variable's
// initializer (or an init function) of Corral's own packages: every
// command, `corral submit` included, would pay for them before main
// (docs/benchmarks.md, "CLI start-up"). Use internal/lazyre for
// regexps, or sync.OnceValue.
var heavyAtInit = map[string]bool{
	"regexp.MustCompile": true, "regexp.Compile": true, "regexp.MustCompilePOSIX": true,
	"template.Must": true, "template.New": true, "template.ParseFS": true, "template.ParseFiles": true,
	"sql.Open": true, "os.ReadFile": true, "os.Open": true, "exec.Command": true,
}

// TestNothingHeavyAtInit: no package of this module has an init function
// or a package-level variable initialised by a heavy call (compiling a
// regexp or a template, opening a database or a file, starting a process).
func TestNothingHeavyAtInit(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not found from %s: %v", root, err)
	}
	files := 0
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "e2e" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files++
		rel, _ := filepath.Rel(root, path)
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil && d.Name.Name == "init" {
					t.Errorf("%s: func init() runs for every corral command; make it lazy", rel)
				}
			case *ast.GenDecl:
				if d.Tok != token.VAR {
					continue
				}
				for _, spec := range d.Specs {
					for _, v := range spec.(*ast.ValueSpec).Values {
						ast.Inspect(v, func(n ast.Node) bool {
							if _, ok := n.(*ast.FuncLit); ok {
								return false // runs later, when called
							}
							call, ok := n.(*ast.CallExpr)
							if !ok {
								return true
							}
							if sel, ok := call.Fun.(*ast.SelectorExpr); ok {
								if x, ok := sel.X.(*ast.Ident); ok && heavyAtInit[x.Name+"."+sel.Sel.Name] {
									t.Errorf("%s: package-level %s.%s runs for every corral command; make it lazy (internal/lazyre, sync.OnceValue)",
										fset.Position(call.Pos()), x.Name, sel.Sel.Name)
								}
							}
							return true
						})
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 50 {
		t.Fatalf("walked only %d Go files under %s", files, root)
	}
}
