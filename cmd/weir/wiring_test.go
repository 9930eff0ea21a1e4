package main

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The rule of issue 23: cmd/weir is wiring (flags → config), its
// lifecycle and sources' workings live below it. These bounds keep it so.
const (
	maxCmdLines  = 1800 // non-test lines of cmd/weir, blank lines and comments included
	maxFuncLines = 80   // lines of one function, from func to its closing brace
)

// forbidden are the packages cmd/weir must reach only through
// internal/agent and the sources' own configuration: records, sinks,
// metrics, and any package inside a source.
func forbidden(path string) bool {
	p, ok := strings.CutPrefix(path, "github.com/weir-dev/weir/internal/")
	if !ok {
		return false
	}
	switch {
	case p == "flow", p == "metrics", p == "sink", strings.HasPrefix(p, "sink/"):
		return true
	case strings.HasPrefix(p, "source/"):
		return strings.Count(p, "/") > 1 // source/NAME is its configuration; source/NAME/x its internals
	}
	return false
}

func TestCmdIsWiring(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	lines, nfiles := 0, 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		nfiles++
		lines += bytes.Count(src, []byte("\n")) // as wc -l counts them
		af, err := parser.ParseFile(fset, f, src, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range af.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); forbidden(p) {
				t.Errorf("%s imports %s: cmd/weir reaches records, sinks, metrics and sources' internals only through internal/agent", f, p)
			}
		}
		ast.Inspect(af, func(n ast.Node) bool {
			if fd, ok := n.(*ast.FuncDecl); ok && fd.Body != nil {
				if l := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1; l > maxFuncLines {
					t.Errorf("%s: %s is %d lines, more than %d: move what is not flag → config to the package that owns it", f, fd.Name.Name, l, maxFuncLines)
				}
			}
			return true
		})
	}
	if nfiles == 0 {
		t.Fatal("no Go files: the test does not run in cmd/weir")
	}
	if lines > maxCmdLines {
		t.Errorf("cmd/weir has %d non-test lines, more than %d: it is wiring, move the rest below it", lines, maxCmdLines)
	}
	t.Logf("cmd/weir: %d non-test lines in %d files", lines, nfiles)
}

// The rule's own check: forbidden tells the packages apart.
func TestForbiddenImports(t *testing.T) {
	for p, want := range map[string]bool{
		"github.com/weir-dev/weir/internal/flow":             true,
		"github.com/weir-dev/weir/internal/sink":             true,
		"github.com/weir-dev/weir/internal/sink/kafka":       true,
		"github.com/weir-dev/weir/internal/metrics":          true,
		"github.com/weir-dev/weir/internal/source/ebpf/bpf":  true,
		"github.com/weir-dev/weir/internal/source/conntrack": false,
		"github.com/weir-dev/weir/internal/sinkhole":         false,
		"github.com/weir-dev/weir/internal/agent":            false,
		"github.com/weir-dev/weir/internal/flowmeter":        false,
		"fmt": false,
	} {
		if forbidden(p) != want {
			t.Errorf("forbidden(%s) = %v, want %v", p, !want, want)
		}
	}
}
