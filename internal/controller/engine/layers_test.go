package engine

import (
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// layers are the engine's files from the bottom up: a file may refer to
// what its own layer and the layers below declare, never to what a layer
// above declares, so a reader can read the engine from the bottom up
// (issue 24). A new file must be placed here.
var layers = [][]string{
	// The object, its kind, names, conditions, patches, events and metrics,
	// and what the reconciler remembers of the Jobs it started.
	{"object.go", "kind.go", "names.go", "status.go", "reconciler.go", "patch.go", "events.go", "metrics.go", "secretdata.go", "started.go"},
	// Job mechanics: Secrets, inputs, runner Jobs, image, identity.
	{"secrets.go", "inputs.go", "jobs.go", "image.go", "identity.go", "history.go", "watch.go", "labelindex.go"},
	// State: the state and its history, backups, the lock, what was applied.
	{"state.go", "backup.go", "lock.go", "applied.go"},
	// Decisions: outcomes and their steps, plans and approvals, the guard,
	// drift, restore, pause, and the start of the Job a decision asks for.
	{"start.go", "outcome.go", "steps.go", "plans.go", "approval.go", "guard.go", "drift.go", "refresh.go", "held.go", "restore.go", "paused.go", "settle.go", "migrate.go", "published.go"},
	// The reconcile: the normal and delete paths, moves.
	{"controller.go", "delete.go", "move.go"},
}

func TestLayers(t *testing.T) {
	layer := map[string]int{}
	for i, files := range layers {
		for _, f := range files {
			layer[f] = i
		}
	}
	fs := token.NewFileSet()
	paths, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	parsed := map[string]*ast.File{}
	// Where each package-level name is declared: functions, types,
	// variables and constants by name, methods by name apart.
	decl, method := map[string]string{}, map[string][]string{}
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		if _, ok := layer[p]; !ok {
			t.Errorf("%s is in no layer", p)
			continue
		}
		f, err := parser.ParseFile(fs, p, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		parsed[p] = f
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv != nil {
					method[d.Name.Name] = append(method[d.Name.Name], p)
				} else {
					decl[d.Name.Name] = p
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						decl[s.Name.Name] = p
					case *ast.ValueSpec:
						for _, n := range s.Names {
							decl[n.Name] = p
						}
					}
				}
			}
		}
	}
	for p, f := range parsed {
		up := map[string][]string{}
		note := func(name, in string) {
			if layer[in] > layer[p] && !slices.Contains(up[in], name) {
				up[in] = append(up[in], name)
			}
		}
		var visit func(n ast.Node) bool
		visit = func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncDecl:
				// Its own name is not a reference to a namesake.
				if n.Recv != nil {
					ast.Inspect(n.Recv, visit)
				}
				ast.Inspect(n.Type, visit)
				if n.Body != nil {
					ast.Inspect(n.Body, visit)
				}
				return false
			case *ast.SelectorExpr:
				// A method of the engine's own types, when only one file
				// declares a method of that name.
				if in := method[n.Sel.Name]; len(in) == 1 {
					note(n.Sel.Name, in[0])
				}
			case *ast.Ident:
				if in, ok := decl[n.Name]; ok && n.Obj == nil {
					note(n.Name, in)
				}
			}
			return true
		}
		ast.Inspect(f, visit)
		for _, in := range slices.Sorted(maps.Keys(up)) {
			t.Errorf("%s (layer %d) refers up to %s (layer %d): %s", p, layer[p], in, layer[in], strings.Join(up[in], ", "))
		}
	}
}
