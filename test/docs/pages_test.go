package docs

import (
	"io/fs"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// index is the page every other page is reached from.
const index = "docs/README.md"

// pages returns README.md and every markdown page under docs/, as paths
// relative to the repository's root with forward slashes.
func pages(t *testing.T) []string {
	t.Helper()
	out := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) < 20 {
		t.Fatalf("only %d pages found: the walk is broken", len(out))
	}
	return out
}

// userPage says whether a page is for the people who use captf: every page
// but the developer guide under docs/dev/ and a changelog.
func userPage(rel string) bool {
	return !strings.HasPrefix(rel, "docs/dev/") && !strings.HasPrefix(strings.ToUpper(path.Base(rel)), "CHANGELOG")
}

// TestEveryPageReachable fails naming each page under docs/ that no chain
// of relative links from docs/README.md reaches.
func TestEveryPageReachable(t *testing.T) {
	reached := map[string]bool{index: true}
	queue := []string{index}
	for len(queue) > 0 {
		page := queue[0]
		queue = queue[1:]
		for _, l := range links(read(t, page)) {
			target, _, _ := strings.Cut(l.target, "#")
			if target == "" || !strings.HasSuffix(target, ".md") {
				continue
			}
			dest := path.Clean(path.Join(path.Dir(page), target))
			if !reached[dest] {
				reached[dest] = true
				queue = append(queue, dest)
			}
		}
	}
	for _, p := range pages(t) {
		if strings.HasPrefix(p, "docs/") && !reached[p] {
			t.Errorf("%s: no chain of links from %s reaches it; link it from the index or from a page the index reaches", p, index)
		}
	}
	if !reached["README.md"] {
		// The index links back to the project's front page.
		t.Errorf("%s does not link to the project's README.md", index)
	}
}

// record matches what belongs to a development record, not to a user
// page: a reference to an issue or a pull request, a commit hash, a date
// of the work, words about the change that wrote the page.
var record = []struct {
	what string
	re   *regexp.Regexp
}{
	{"an issue or pull request number", regexp.MustCompile(`(?i)\b(issues?|pull requests?|PRs?|bugs?|tickets?)\s*#?\d+\b|\(#\d+\)`)},
	{"a commit hash", regexp.MustCompile(`(?i)\b(commits?|at|since|before|after|in)\s+[0-9a-f]{7,40}\b`)},
	{"a date", regexp.MustCompile(`\b20\d\d-[01]\d-[0-3]\d\b|(?i)\b(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+[0-3]?\d,?\s+20\d\d\b`)},
	{"words about the change that wrote the page", regexp.MustCompile(`(?i)\bthis (change|commit|session|patch|pull request)\b|\blater the same day\b|\bthe same session\b|\b(yesterday|last week|this week)\b`)},
}

// TestUserPagesHoldNoRecords fails naming each line of a user page that
// holds an issue number, a commit hash, a date, or words about the change
// that wrote it: those go to docs/dev/. Code blocks are read too: a
// command's output that shows a timestamp is the one date allowed, as
// 2006-01-02T15:04:05.
func TestUserPagesHoldNoRecords(t *testing.T) {
	checked := 0
	for _, p := range pages(t) {
		if !userPage(p) {
			continue
		}
		checked++
		for i, line := range strings.Split(read(t, p), "\n") {
			for _, r := range record {
				for _, m := range r.re.FindAllStringIndex(line, -1) {
					if r.what == "a date" && m[1] < len(line) && line[m[1]] == 'T' {
						continue // a timestamp in a command's output
					}
					if strings.HasPrefix(strings.ToLower(line[m[1]:]), " set") {
						continue // "this change set", of previews
					}
					t.Errorf("%s:%d: %s in a user page (%q): say what captf does now, and keep the history under docs/dev/", p, i+1, r.what, line[m[0]:m[1]])
				}
			}
		}
	}
	if checked < 20 {
		t.Errorf("only %d user pages checked", checked)
	}
}

// TestTablesRender fails naming each table row that does not render as
// one: a row whose table has no header and delimiter row above it, as
// when a paragraph splits a table in two and the second half shows as
// text.
func TestTablesRender(t *testing.T) {
	for _, p := range pages(t) {
		lines := strings.Split(read(t, p), "\n")
		fence := false
		inTable := false
		for i, line := range lines {
			trimmed := strings.TrimSpace(line)
			if strings.HasPrefix(trimmed, "```") {
				fence = !fence
				inTable = false
				continue
			}
			if fence || !strings.HasPrefix(trimmed, "|") {
				inTable = false
				continue
			}
			if inTable {
				continue
			}
			// The first row of a table is its header: the next line must be
			// a delimiter row with as many cells.
			header := splitRow(trimmed)
			if i+1 < len(lines) {
				next := strings.TrimSpace(lines[i+1])
				if strings.HasPrefix(next, "|") && isDelimiter(splitRow(next)) {
					if d := splitRow(next); len(d) != len(header) {
						t.Errorf("%s:%d: a table header of %d cells over a delimiter row of %d: it renders as text", p, i+1, len(header), len(d))
					}
					inTable = true
					continue
				}
			}
			t.Errorf("%s:%d: a table row with no header and delimiter row above it renders as text (is it a row after a paragraph break?): %.60s", p, i+1, trimmed)
			inTable = true
		}
	}
}

// pluginInstall matches a command that installs the kubectl plugin.
var pluginInstall = regexp.MustCompile(`krew install|go (install|build) \S*kubectl-captf|go (install|build) .*cmd/kubectl-captf`)

// TestPluginInstalledOnOnePage fails naming each user page, but the
// plugin's own, that spells a command installing kubectl-captf: the way
// to install it is told once, in kubectl-captf.md#install, and the other
// pages link there.
func TestPluginInstalledOnOnePage(t *testing.T) {
	const home = "docs/kubectl-captf.md"
	if !pluginInstall.MatchString(read(t, home)) {
		t.Fatalf("%s says no way to install the plugin", home)
	}
	if !headingAnchors(read(t, home))["install"] {
		t.Fatalf("%s has no Install section for the other pages to link to", home)
	}
	for _, p := range pages(t) {
		if !userPage(p) || p == home {
			continue
		}
		for i, line := range strings.Split(read(t, p), "\n") {
			if m := pluginInstall.FindString(line); m != "" {
				t.Errorf("%s:%d: installs the plugin (%q): link to kubectl-captf.md#install instead", p, i+1, m)
			}
		}
	}
}
