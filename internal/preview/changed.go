package preview

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
)

// selectComponents returns the components in the change: every component,
// or with ChangedFrom those whose steps read a changed file or whose
// declaration changed, plus every component that depends on one of them.
func selectComponents(ctx context.Context, o Options) (map[string]bool, error) {
	in := map[string]bool{}
	if o.ChangedFrom == "" {
		for _, c := range o.Project.Components {
			in[c.Name] = true
		}
		return in, nil
	}
	changed, err := changedFiles(ctx, o.Root, o.ChangedFrom)
	if err != nil {
		return nil, err
	}
	touched, err := touchedByProjectFile(ctx, o, changed)
	if err != nil {
		return nil, err
	}
	for _, c := range o.Project.Components {
		if touched[c.Name] || readsAny(c, o.Root, changed) {
			in[c.Name] = true
		}
	}
	// Dependents, to a fixed point.
	for grew := true; grew; {
		grew = false
		for _, c := range o.Project.Components {
			if in[c.Name] {
				continue
			}
			for _, d := range c.DependsOn {
				if in[d] {
					in[c.Name], grew = true, true
					break
				}
			}
		}
	}
	return in, nil
}

// changedFiles lists the files that differ between the merge base of ref
// and HEAD and the work tree, plus untracked files git does not ignore,
// as slash paths from the repository root.
func changedFiles(ctx context.Context, root, ref string) ([]string, error) {
	if strings.HasPrefix(ref, "-") {
		return nil, fmt.Errorf("%w: --changed-from %q: not a git revision", ErrInvalid, ref)
	}
	diff, err := git(ctx, root, "diff", "--name-only", "-z", "--no-renames", "--merge-base", ref, "--")
	if err != nil {
		return nil, fmt.Errorf("%w: --changed-from %s: %w", ErrInvalid, ref, err)
	}
	untracked, err := git(ctx, root, "ls-files", "-z", "--others", "--exclude-standard")
	if err != nil {
		return nil, err
	}
	var files []string
	for _, f := range strings.Split(diff+untracked, "\x00") {
		if f != "" {
			files = append(files, f)
		}
	}
	return files, nil
}

// git runs git in dir and returns its stdout; the error carries stderr.
func git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("git %s: %w: %s", args[0], err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// readsAny reports whether a step of c names a changed path: any string
// in its inputs, or any word of one (a shell command's script), that is a
// changed file or a directory holding one.
func readsAny(c *Component, root string, changed []string) bool {
	found := false
	var walk func(v any)
	walk = func(v any) {
		switch t := v.(type) {
		case string:
			for _, word := range strings.Fields(t) {
				p, ok := repoPath(root, word)
				if !ok {
					continue
				}
				for _, f := range changed {
					if p == "." || f == p || strings.HasPrefix(f, p+"/") {
						found = true
					}
				}
			}
		case map[string]any:
			for _, e := range t {
				walk(e)
			}
		case []any:
			for _, e := range t {
				walk(e)
			}
		}
	}
	for _, s := range c.Steps {
		walk(s.Inputs)
	}
	return found
}

// touchedByProjectFile compares the project file at the merge base with
// the one in the work tree when it changed: a component whose declaration
// differs or is new is touched, and every component is when the selected
// environment differs or the old file cannot be read.
func touchedByProjectFile(ctx context.Context, o Options, changed []string) (map[string]bool, error) {
	rel, ok := repoPath(o.Root, o.Project.File)
	if !ok {
		return nil, nil
	}
	touched := map[string]bool{}
	isChanged := false
	for _, f := range changed {
		isChanged = isChanged || f == rel
	}
	if !isChanged {
		return touched, nil
	}
	all := func() map[string]bool {
		for _, c := range o.Project.Components {
			touched[c.Name] = true
		}
		return touched
	}
	base, err := git(ctx, o.Root, "merge-base", o.ChangedFrom, "HEAD")
	if err != nil {
		return nil, fmt.Errorf("%w: --changed-from %s: %w", ErrInvalid, o.ChangedFrom, err)
	}
	data, err := git(ctx, o.Root, "show", strings.TrimSpace(base)+":"+rel)
	if err != nil {
		return all(), nil // the file is new
	}
	old, err := ParseProject(filepath.ToSlash(rel)+"@"+o.ChangedFrom, []byte(data), func(string) bool { return true })
	if err != nil {
		return all(), nil
	}
	if declaration(old.Environments[o.Env]) != declaration(o.Project.Environments[o.Env]) {
		return all(), nil
	}
	for _, c := range o.Project.Components {
		was := old.Component(c.Name)
		if was == nil || componentDeclaration(was) != componentDeclaration(c) {
			touched[c.Name] = true
		}
	}
	return touched, nil
}

func componentDeclaration(c *Component) string {
	steps := make([]stepDeclaration, len(c.Steps))
	for i, s := range c.Steps {
		steps[i] = stepDeclaration{Name: s.Name, Kind: s.Kind, Inputs: s.Inputs}
	}
	return declaration(map[string]any{"dependsOn": c.declared, "steps": steps})
}

// declaration is the JSON of v, for comparing two declarations.
func declaration(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("unmarshalable: %v", err)
	}
	return string(b)
}

// MergeBase returns the commit where HEAD and ref meet, the revision a
// --changed-from of a later apply names so that it selects the same
// components after the change merged.
func MergeBase(ctx context.Context, root, ref string) (string, error) {
	if strings.HasPrefix(ref, "-") {
		return "", fmt.Errorf("%w: --changed-from %q: not a git revision", ErrInvalid, ref)
	}
	out, err := git(ctx, root, "merge-base", ref, "HEAD")
	if err != nil {
		return "", fmt.Errorf("%w: --changed-from %s: %w", ErrInvalid, ref, err)
	}
	return strings.TrimSpace(out), nil
}
