// Package docs keeps the documentation in step with the code: every
// condition type, condition reason and event reason the manager's packages
// declare, every annotation and label they set or read, every outcome of
// the runner and every exit code appear in docs/reference.md, whose tables
// name nothing the code does not; every relative link of README.md and of
// the pages under docs/ reaches a file, and a heading of it when it names
// one; every page is reachable from docs/README.md; the user pages carry no
// development record; and every table renders.
package docs

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

const (
	root      = "../.."
	reference = "docs/reference.md"
)

// Where the names live: the packages whose constants the reference lists.
var (
	// reasonPackages declare the condition types (Condition*), the
	// condition reasons (Reason*) and the event reasons (Event*) the
	// manager writes.
	reasonPackages = []string{"api/v1alpha1", "internal/controller/engine", "internal/controller/terraformcluster"}
	// keyPackages declare the annotations (Annotation*), labels (Label*)
	// and the finalizer the manager and terraform's backend put on objects.
	keyPackages = []string{"api/v1alpha1", "internal/controller/engine", "internal/controller/terraformcluster", "internal/tfstate"}
	// exitPackages declare the exit codes (Exit*) and the runner's
	// outcomes (Outcome*).
	exitPackages = []string{"internal/runner", "internal/cli"}
)

// constant is a string or integer constant of a package.
type constant struct {
	Name, Value, Pos string
}

// TestReferenceNamesEveryConstant fails naming each condition type,
// condition reason, event reason, annotation, label, runner outcome and
// exit code of the code that docs/reference.md does not show in a table.
func TestReferenceNamesEveryConstant(t *testing.T) {
	cells := tableCells(t, read(t, reference))
	for _, c := range constants(t, reasonPackages, "Reason", "Event", "Condition") {
		if !cells["`"+c.Value+"`"] {
			t.Errorf("%s: %s = %q is missing from %s (a condition or event reason the code emits; add it to a table with its meaning)", c.Pos, c.Name, c.Value, reference)
		}
	}
	for _, c := range constants(t, keyPackages, "Annotation", "annotation", "Label", "label", "Finalizer") {
		if !cells["`"+c.Value+"`"] {
			t.Errorf("%s: %s = %q is missing from %s (an annotation or label the code sets or reads; add it with the object it is on)", c.Pos, c.Name, c.Value, reference)
		}
	}
	for _, c := range constants(t, exitPackages, "Outcome") {
		if !cells["`"+c.Value+"`"] {
			t.Errorf("%s: %s = %q is missing from %s (a runner outcome)", c.Pos, c.Name, c.Value, reference)
		}
	}
	for _, c := range constants(t, exitPackages, "Exit") {
		if !cells[c.Value] {
			t.Errorf("%s: exit code %s = %s is missing from the exit code tables of %s", c.Pos, c.Name, c.Value, reference)
		}
	}
}

// TestReferenceNamesNothingElse fails naming each condition, reason or
// event in the reference's tables that no constant of the code declares:
// a reason renamed or removed in the code must leave the reference too.
func TestReferenceNamesNothingElse(t *testing.T) {
	known := map[string]bool{}
	for _, c := range constants(t, reasonPackages, "Reason", "Event", "Condition") {
		known[c.Value] = true
	}
	// The columns whose every entry must be one of the code's values.
	columns := map[string]bool{"condition": true, "reason": true, "event": true}
	checked := 0
	for _, tbl := range tables(read(t, reference)) {
		for i, h := range tbl.header {
			if !columns[strings.ToLower(h)] {
				continue
			}
			for _, row := range tbl.rows {
				if i >= len(row.cells) {
					continue
				}
				for _, v := range codeSpans(row.cells[i]) {
					checked++
					if !known[v] {
						t.Errorf("%s:%d: %s %q is declared by no Reason*, Event* or Condition* constant of %s", reference, row.line, strings.ToLower(h), v, strings.Join(reasonPackages, ", "))
					}
				}
			}
		}
	}
	if checked < 50 {
		t.Errorf("only %d conditions, reasons and events found in the tables of %s: the table reader is broken", checked, reference)
	}
}

// TestLinks fails naming each relative link of README.md and of the pages
// under docs/ that reaches no file, or names a heading its file does not
// have.
func TestLinks(t *testing.T) {
	var files []string
	for _, rel := range pages(t) {
		files = append(files, filepath.Join(root, filepath.FromSlash(rel)))
	}
	anchors := map[string]map[string]bool{}
	anchorsOf := func(file string) map[string]bool {
		if a, ok := anchors[file]; ok {
			return a
		}
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		anchors[file] = headingAnchors(string(b))
		return anchors[file]
	}
	checked := 0
	for _, file := range files {
		rel, _ := filepath.Rel(root, file)
		for _, l := range links(read(t, rel)) {
			target, anchor, _ := strings.Cut(l.target, "#")
			dest := file
			if target != "" {
				dest = filepath.Join(filepath.Dir(file), filepath.FromSlash(target))
				if _, err := os.Stat(dest); err != nil {
					t.Errorf("%s:%d: link %q: %s does not exist", rel, l.line, l.target, target)
					continue
				}
			}
			checked++
			if anchor == "" {
				continue
			}
			if !strings.HasSuffix(dest, ".md") {
				t.Errorf("%s:%d: link %q: an anchor into a file that is not markdown", rel, l.line, l.target)
				continue
			}
			if !anchorsOf(dest)[anchor] {
				t.Errorf("%s:%d: link %q: %s has no heading whose anchor is #%s", rel, l.line, l.target, path.Base(filepath.ToSlash(dest)), anchor)
			}
		}
	}
	if checked < 50 {
		t.Errorf("only %d relative links found: the link reader is broken", checked)
	}
}

// TestSlug holds the anchors to GitHub's rules.
func TestSlug(t *testing.T) {
	for heading, want := range map[string]string{
		"The inputs hash (`h2:`)":                            "the-inputs-hash-h2",
		"captf lint [DIR] --role cluster|machine|pool":       "captf-lint-dir---role-clustermachinepool",
		"The manager's side":                                 "the-managers-side",
		"What apply also checks: what runs outside the plan": "what-apply-also-checks-what-runs-outside-the-plan",
		"Install a release":                                  "install-a-release",
		"`StateLost`":                                        "statelost",
	} {
		if got := slug(heading); got != want {
			t.Errorf("slug(%q) = %q, want %q", heading, got, want)
		}
	}
	got := headingAnchors("# A\n```\n# not a heading\n```\n## A\n### B\n")
	for _, want := range []string{"a", "a-1", "b"} {
		if !got[want] {
			t.Errorf("headingAnchors: no %q in %v", want, got)
		}
	}
	if got["not-a-heading"] {
		t.Error("headingAnchors read a heading inside a code block")
	}
}

func read(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// constants returns the string and integer constants of pkgs whose names
// start with one of prefixes, sorted by position. A constant defined by
// another constant (of the same package or of a parsed one) is resolved;
// one that cannot be is a failure, never skipped.
func constants(t *testing.T, pkgs []string, prefixes ...string) []constant {
	t.Helper()
	fset := token.NewFileSet()
	// exprs: package name → constant name → its expression and file.
	type def struct {
		expr ast.Expr
		file *ast.File
		pkg  string
	}
	exprs := map[string]map[string]def{}
	var order []struct{ pkg, name string }
	for _, dir := range allPackages(pkgs) {
		parsed, err := parser.ParseDir(fset, filepath.Join(root, dir), func(fi os.FileInfo) bool {
			return !strings.HasSuffix(fi.Name(), "_test.go")
		}, 0)
		if err != nil {
			t.Fatal(err)
		}
		for name, p := range parsed {
			if exprs[name] == nil {
				exprs[name] = map[string]def{}
			}
			for _, f := range p.Files {
				for _, d := range f.Decls {
					g, ok := d.(*ast.GenDecl)
					if !ok || g.Tok != token.CONST {
						continue
					}
					for _, s := range g.Specs {
						vs := s.(*ast.ValueSpec)
						for i, n := range vs.Names {
							if i >= len(vs.Values) {
								continue // iota repetition: no string constant of ours is one
							}
							exprs[name][n.Name] = def{vs.Values[i], f, name}
							if slices.Contains(pkgs, dir) {
								order = append(order, struct{ pkg, name string }{name, n.Name})
							}
						}
					}
				}
			}
		}
	}
	var eval func(d def, depth int) (string, bool)
	eval = func(d def, depth int) (string, bool) {
		if depth > 8 {
			return "", false
		}
		switch e := d.expr.(type) {
		case *ast.BasicLit:
			if e.Kind == token.STRING {
				s, err := strconv.Unquote(e.Value)
				return s, err == nil
			}
			if e.Kind == token.INT {
				return e.Value, true
			}
		case *ast.Ident:
			if next, ok := exprs[d.pkg][e.Name]; ok {
				return eval(next, depth+1)
			}
		case *ast.SelectorExpr:
			if x, ok := e.X.(*ast.Ident); ok {
				pkg := importedName(d.file, x.Name)
				if next, ok := exprs[pkg][e.Sel.Name]; ok {
					return eval(next, depth+1)
				}
			}
		case *ast.CallExpr: // a conversion: PlanReason("Manual")
			if len(e.Args) == 1 {
				return eval(def{e.Args[0], d.file, d.pkg}, depth+1)
			}
		}
		return "", false
	}
	var out []constant
	seen := map[string]bool{}
	for _, o := range order {
		if !hasPrefix(o.name, prefixes) || seen[o.pkg+"."+o.name] {
			continue
		}
		seen[o.pkg+"."+o.name] = true
		d := exprs[o.pkg][o.name]
		v, ok := eval(d, 0)
		pos := fset.Position(d.expr.Pos())
		rel, _ := filepath.Rel(root, pos.Filename)
		where := fmt.Sprintf("%s:%d", filepath.ToSlash(rel), pos.Line)
		if !ok {
			t.Errorf("%s: %s: cannot work out its value; teach this test", where, o.name)
			continue
		}
		out = append(out, constant{Name: o.pkg + "." + o.name, Value: v, Pos: where})
	}
	if len(out) == 0 {
		t.Fatalf("no constant starting %v in %v: the reader is broken", prefixes, pkgs)
	}
	sort.SliceStable(out, func(i, j int) bool {
		fi, li, _ := strings.Cut(out[i].Pos, ":")
		fj, lj, _ := strings.Cut(out[j].Pos, ":")
		if fi != fj {
			return fi < fj
		}
		ni, _ := strconv.Atoi(li)
		nj, _ := strconv.Atoi(lj)
		return ni < nj
	})
	return out
}

// allPackages is pkgs and the packages their constants may refer to.
func allPackages(pkgs []string) []string {
	all := slices.Clone(pkgs)
	for _, p := range []string{"api/v1alpha1", "internal/tfstate", "internal/runner"} {
		if !slices.Contains(all, p) {
			all = append(all, p)
		}
	}
	return all
}

// importedName is the package name an identifier of f refers to: the last
// element of the import path, or the import's alias.
func importedName(f *ast.File, ident string) string {
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		name := path.Base(p)
		if imp.Name != nil {
			name = imp.Name.Name
		}
		if name == ident {
			return path.Base(p)
		}
	}
	return ident
}

func hasPrefix(name string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// table is a markdown table: its header cells and its rows.
type table struct {
	header []string
	rows   []row
}

type row struct {
	cells []string
	line  int
}

// tables reads the markdown tables of text outside code blocks.
func tables(text string) []table {
	var out []table
	var cur *table
	fence := false
	for i, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "```") {
			fence = !fence
		}
		if fence || !strings.HasPrefix(trimmed, "|") {
			cur = nil
			continue
		}
		cells := splitRow(trimmed)
		switch {
		case cur == nil:
			out = append(out, table{header: cells})
			cur = &out[len(out)-1]
		case isDelimiter(cells):
		default:
			cur.rows = append(cur.rows, row{cells: cells, line: i + 1})
		}
	}
	return out
}

// tableCells is the set of what the tables of text hold: each cell whole,
// and each code span of a cell with its backticks.
func tableCells(t *testing.T, text string) map[string]bool {
	t.Helper()
	set := map[string]bool{}
	for _, tbl := range tables(text) {
		for _, r := range tbl.rows {
			for _, c := range r.cells {
				set[c] = true
				for _, v := range codeSpans(c) {
					set["`"+v+"`"] = true
				}
			}
		}
	}
	if len(set) == 0 {
		t.Fatalf("%s holds no table", reference)
	}
	return set
}

// splitRow splits a table row into its trimmed cells; `\|` is a pipe
// inside a cell.
func splitRow(line string) []string {
	line = strings.TrimSuffix(strings.TrimPrefix(line, "|"), "|")
	var cells []string
	var b strings.Builder
	for i := 0; i < len(line); i++ {
		switch {
		case line[i] == '\\' && i+1 < len(line) && line[i+1] == '|':
			b.WriteByte('|')
			i++
		case line[i] == '|':
			cells = append(cells, strings.TrimSpace(b.String()))
			b.Reset()
		default:
			b.WriteByte(line[i])
		}
	}
	return append(cells, strings.TrimSpace(b.String()))
}

func isDelimiter(cells []string) bool {
	for _, c := range cells {
		if strings.Trim(c, ":-") != "" || c == "" {
			return false
		}
	}
	return true
}

var codeSpan = regexp.MustCompile("`([^`]+)`")

// codeSpans returns what the code spans of s hold.
func codeSpans(s string) []string {
	var out []string
	for _, m := range codeSpan.FindAllStringSubmatch(s, -1) {
		out = append(out, m[1])
	}
	return out
}

// link is a relative markdown link.
type link struct {
	target string
	line   int
}

var (
	inlineLink = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	scheme     = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// links returns the relative links of a markdown text, outside code
// blocks and code spans.
func links(text string) []link {
	var out []link
	fence := false
	for i, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fence = !fence
			continue
		}
		if fence {
			continue
		}
		line = codeSpan.ReplaceAllString(line, "")
		for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
			target := strings.Trim(m[1], "<>")
			if scheme.MatchString(target) {
				continue
			}
			out = append(out, link{target: target, line: i + 1})
		}
	}
	return out
}

// headingAnchors returns the anchors GitHub gives the headings of a
// markdown text: the slug of each, a second one of the same slug with
// "-1", a third with "-2".
func headingAnchors(text string) map[string]bool {
	out := map[string]bool{}
	count := map[string]int{}
	fence := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fence = !fence
			continue
		}
		if fence || !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimLeft(line, "#")
		if len(line)-len(title) > 6 || !strings.HasPrefix(title, " ") {
			continue
		}
		s := slug(strings.TrimSpace(title))
		if n := count[s]; n > 0 {
			out[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			out[s] = true
		}
		count[s]++
	}
	return out
}

// slug is GitHub's anchor of a heading: lower case, spaces become '-',
// what is neither a letter, a digit, '-' nor '_' is dropped.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
