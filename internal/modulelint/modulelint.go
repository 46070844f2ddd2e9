// Package modulelint checks a terraform module against the contract of the
// role it plays for the manager (internal/modulecontract), and against
// what the runner Job owns, by reading its files with hcl: it runs no
// terraform and downloads no provider, so a module author learns before a
// Job fails in a cluster.
//
// It reads what the text of the module says. An expression is judged only
// as far as the text alone tells (a literal, a template, a list or object
// written out, the result of a conversion function); anything that depends
// on a variable, a resource or another function is not judged.
package modulelint

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	hcljson "github.com/hashicorp/hcl/v2/json"

	"github.com/captf/captf/internal/inputfile"
	"github.com/captf/captf/internal/modulecontract"
	"github.com/captf/captf/internal/planconfig"
)

// Severity says whether a finding breaks the module (Error) or may
// surprise its author (Warning).
type Severity string

// The severities.
const (
	Error   Severity = "error"
	Warning Severity = "warning"
)

// Rule identifiers: stable names of what a finding is about, for CI.
const (
	RuleParse             = "parse"
	RuleBackend           = "backend"
	RuleCloud             = "cloud"
	RuleOutputMissing     = "output-missing"
	RuleOutputType        = "output-type"
	RuleOutputSensitive   = "output-sensitive"
	RuleVariableMissing   = "variable-missing"
	RuleVariableType      = "variable-type"
	RuleVariableSensitive = "variable-sensitive"
	RuleCredential        = "credential-not-sensitive"
	RuleProvisioner       = "provisioner"
	RulePreventDestroy    = "prevent-destroy"
	RuleProviderVersion   = "provider-version"
	RuleTruncated         = "truncated"
)

// Finding is one thing the module does that the manager or the runner
// cannot work with, or that may surprise its author.
type Finding struct {
	// File is relative to the module's directory; "" for the module as a
	// whole (something it lacks).
	File string `json:"file"`
	// Line is 1-based; 0 when the finding has no line.
	Line     int      `json:"line"`
	Severity Severity `json:"severity"`
	Rule     string   `json:"rule"`
	Message  string   `json:"message"`
}

// Format renders the finding as one line, file:line: severity: message,
// naming dir for a finding about the module as a whole.
func (f Finding) Format(dir string) string {
	where := cmp.Or(f.File, dir)
	if f.Line > 0 {
		where += ":" + strconv.Itoa(f.Line)
	}
	return where + ": " + string(f.Severity) + ": " + f.Message
}

// Strict returns findings with every warning made an error.
func Strict(findings []Finding) []Finding {
	out := slices.Clone(findings)
	for i := range out {
		out[i].Severity = Error
	}
	return out
}

// Bounds of what Check reads. A module's file is kilobytes and its
// expressions are nested a few levels; what is far larger is refused before
// it is parsed, since parsing holds the whole module in memory and hcl's
// parser recurses once per nested bracket.
const (
	// MaxFileBytes is the largest configuration file Check reads.
	MaxFileBytes = 2 << 20
	// MaxModuleBytes is the most configuration a module's files hold.
	MaxModuleBytes = 4 << 20
	// MaxDepth is the deepest nesting of brackets, braces, parentheses
	// and templates Check parses; a file nested deeper is a finding.
	MaxDepth = 200
	// MaxFindings is how many findings Check returns at most; a last
	// finding of rule RuleTruncated says how many more there were.
	MaxFindings = 1000
)

var (
	// ErrUnknownRole: the role has no contract.
	ErrUnknownRole = errors.New("unknown role")
	// ErrNoConfig: the directory holds no configuration file.
	ErrNoConfig = errors.New("no terraform configuration files")
)

// Check reads the module in dir and returns what it finds, sorted by file
// and line. When a file does not parse, only the parse errors are
// returned: the rest of what the module says is not known.
func Check(ctx context.Context, dir string, role modulecontract.Role) ([]Finding, error) {
	contract, ok := modulecontract.For(role)
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownRole, role)
	}
	m, findings, err := read(ctx, dir)
	if err != nil {
		return nil, err
	}
	if len(findings) == 0 {
		findings = append(findings, m.checkTerraform()...)
		findings = append(findings, m.checkResources()...)
		findings = append(findings, m.checkOutputs(contract)...)
		findings = append(findings, m.checkVariables(contract)...)
		findings = append(findings, m.checkReplicas(role)...)
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("lint %s: %w", dir, context.Cause(ctx))
	}
	slices.SortFunc(findings, func(a, b Finding) int {
		return cmp.Or(cmp.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line), cmp.Compare(a.Rule, b.Rule), cmp.Compare(a.Message, b.Message))
	})
	if len(findings) > MaxFindings {
		findings = append(findings[:MaxFindings], Finding{Severity: Error, Rule: RuleTruncated,
			Message: fmt.Sprintf("more findings than the %d shown", MaxFindings)})
	}
	return findings, nil
}

// module is what Check reads of a module's files.
type module struct {
	// terraform, resources and removed are the blocks of those types.
	terraform, resources, removed []*hcl.Block
	// variables and outputs are the declarations by name, override files
	// merged in.
	variables, outputs map[string]*declaration
}

// declaration is a variable or an output block, with the arguments the
// checks read.
type declaration struct {
	name  string
	def   hcl.Range
	attrs map[string]*hcl.Attribute
}

var (
	fileSchema = &hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{
		{Type: "terraform"},
		{Type: "variable", LabelNames: []string{"name"}},
		{Type: "output", LabelNames: []string{"name"}},
		{Type: "resource", LabelNames: []string{"type", "name"}},
		{Type: "removed"},
	}}
	variableSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "type"}, {Name: "sensitive"}}}
	outputSchema   = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "value"}, {Name: "sensitive"}}}
)

// read parses the module's files as terraform and tofu read them
// (planconfig.ConfigFiles), or returns the parse errors as findings.
func read(ctx context.Context, dir string) (*module, []Finding, error) {
	files, err := planconfig.ConfigFiles(dir)
	if err != nil {
		return nil, nil, err
	}
	if len(files) == 0 {
		return nil, nil, fmt.Errorf("%s: %w", dir, ErrNoConfig)
	}
	var total int64
	for _, name := range files {
		if info, err := os.Stat(filepath.Join(dir, name)); err == nil && info.Mode().IsRegular() {
			total += info.Size()
		}
	}
	if total > MaxModuleBytes {
		return nil, nil, fmt.Errorf("%s: its configuration files hold more than %s: %w", dir, inputfile.Size(MaxModuleBytes), inputfile.ErrTooLarge)
	}
	m := &module{variables: map[string]*declaration{}, outputs: map[string]*declaration{}}
	var findings []Finding
	for _, name := range files {
		if ctx.Err() != nil {
			return nil, nil, fmt.Errorf("lint %s: %w", dir, context.Cause(ctx))
		}
		src, err := inputfile.Read(ctx, filepath.Join(dir, name), MaxFileBytes)
		if err != nil {
			return nil, nil, err
		}
		f, diags := parse(src, name)
		if diags.HasErrors() {
			findings = append(findings, parseFindings(name, diags)...)
			continue
		}
		content, _, diags := f.Body.PartialContent(fileSchema)
		if diags.HasErrors() {
			findings = append(findings, parseFindings(name, diags)...)
			continue
		}
		override := planconfig.IsOverride(name)
		for _, b := range content.Blocks {
			switch b.Type {
			case "terraform":
				m.terraform = append(m.terraform, b)
			case "resource":
				m.resources = append(m.resources, b)
			case "removed":
				m.removed = append(m.removed, b)
			case "variable":
				findings = append(findings, m.declare("a variable", m.variables, b, variableSchema, override)...)
			case "output":
				findings = append(findings, m.declare("an output", m.outputs, b, outputSchema, override)...)
			}
		}
	}
	return m, findings, nil
}

// parse parses one file as HCL or, for a .json name, as JSON, once its
// nesting is known to be within MaxDepth.
func parse(src []byte, name string) (*hcl.File, hcl.Diagnostics) {
	json := strings.HasSuffix(name, ".json")
	if line := tooDeep(src, json); line > 0 {
		return nil, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Nested too deep",
			Detail:   fmt.Sprintf("brackets, braces, parentheses or templates are nested more than %d deep; captf lint reads no deeper", MaxDepth),
			Subject:  &hcl.Range{Filename: name, Start: hcl.Pos{Line: line}, End: hcl.Pos{Line: line}},
		}}
	}
	if json {
		return hcljson.Parse(src, name)
	}
	return hclsyntax.ParseConfig(src, name, hcl.InitialPos)
}

// tooDeep returns the line where src nests deeper than MaxDepth, or 0. HCL
// is lexed (the lexer does not recurse), so brackets in strings and
// comments do not count; JSON is scanned with its strings skipped.
func tooDeep(src []byte, json bool) int {
	depth := 0
	if json {
		line, inString, escaped := 1, false, false
		for _, c := range src {
			switch {
			case c == '\n':
				line++
			case inString && escaped:
				escaped = false
			case inString && c == '\\':
				escaped = true
			case c == '"':
				inString = !inString
			case inString:
			case c == '[' || c == '{':
				if depth++; depth > MaxDepth {
					return line
				}
			case c == ']' || c == '}':
				depth = max(depth-1, 0)
			}
		}
		return 0
	}
	tokens, _ := hclsyntax.LexConfig(src, "", hcl.InitialPos)
	for _, t := range tokens {
		switch t.Type {
		case hclsyntax.TokenOBrace, hclsyntax.TokenOBrack, hclsyntax.TokenOParen,
			hclsyntax.TokenTemplateInterp, hclsyntax.TokenTemplateControl,
			hclsyntax.TokenOQuote, hclsyntax.TokenOHeredoc:
			if depth++; depth > MaxDepth {
				return t.Range.Start.Line
			}
		case hclsyntax.TokenCBrace, hclsyntax.TokenCBrack, hclsyntax.TokenCParen,
			hclsyntax.TokenTemplateSeqEnd, hclsyntax.TokenCQuote, hclsyntax.TokenCHeredoc:
			depth = max(depth-1, 0)
		}
	}
	return 0
}

// declare adds a variable or output block to decls. A block of an override
// file replaces the arguments it sets, as terraform merges it.
func (m *module) declare(what string, decls map[string]*declaration, b *hcl.Block, schema *hcl.BodySchema, override bool) []Finding {
	content, _, diags := b.Body.PartialContent(schema)
	if diags.HasErrors() {
		return parseFindings(b.DefRange.Filename, diags)
	}
	name := b.Labels[0]
	d, ok := decls[name]
	switch {
	case ok && !override:
		// Declared twice: terraform refuses the module.
		return []Finding{at(b.DefRange, Error, RuleParse, "Duplicate declaration: %s named %q was already declared at %s:%d; terraform refuses the module",
			what, name, d.def.Filename, d.def.Start.Line)}
	case !ok:
		d = &declaration{name: name, def: b.DefRange, attrs: map[string]*hcl.Attribute{}}
		decls[name] = d
	}
	for k, a := range content.Attributes {
		d.attrs[k] = a
	}
	return nil
}

// parseFindings are the errors of diags, each at the place it names: at
// most MaxFindings and one more, which Check truncates.
func parseFindings(file string, diags hcl.Diagnostics) []Finding {
	var out []Finding
	for _, d := range diags.Errs() {
		if len(out) > MaxFindings {
			break
		}
		f := Finding{File: file, Severity: Error, Rule: RuleParse, Message: d.Error()}
		if d, ok := d.(*hcl.Diagnostic); ok {
			f.Message = strings.TrimSuffix(d.Summary+": "+d.Detail, ": ")
			if d.Subject != nil {
				f.File, f.Line = d.Subject.Filename, d.Subject.Start.Line
			}
		}
		out = append(out, f)
	}
	return out
}

// at is a finding at the start of r.
func at(r hcl.Range, sev Severity, rule, format string, args ...any) Finding {
	return Finding{File: r.Filename, Line: r.Start.Line, Severity: sev, Rule: rule, Message: fmt.Sprintf(format, args...)}
}
