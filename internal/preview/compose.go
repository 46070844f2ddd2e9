package preview

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/captf/captf/internal/inputfile"
	"github.com/captf/captf/pkg/changeset"
)

// CompositionPrefix versions the composition digest.
const CompositionPrefix = "cd1:"

// composition is what a composition digest covers: the component's
// declaration, the environment with its vars, every bound step's inputs as
// written (a stackOutput as the reference, never its value) and the bytes
// of every local file a bound step deploys from.
type composition struct {
	Component   string            `json:"component"`
	DependsOn   []string          `json:"dependsOn"`
	Steps       []stepDeclaration `json:"steps"`
	Environment string            `json:"environment"`
	Vars        map[string]string `json:"vars"`
	Files       []boundFile       `json:"files"`
}

type stepDeclaration struct {
	Name   string         `json:"name"`
	Kind   string         `json:"kind"`
	Inputs map[string]any `json:"inputs"`
}

// boundFile is one file by its path from the repository root and the
// SHA-256 of its bytes.
type boundFile struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
}

// bound is what the steps without plan of one component deploy from.
type bound struct {
	files []boundFile
	holes []changeset.Hole
	// named says a step names a file or directory of the field table,
	// whether or not it exists.
	named bool
}

// bindSteps reads the files steps deploy from and the holes of what they
// deploy but the digest cannot name.
func bindSteps(ctx context.Context, root string, steps []*Step) (*bound, error) {
	b := &bound{}
	seen := map[string]bool{}
	for _, s := range steps {
		if unboundKinds[s.Kind] {
			b.holes = append(b.holes, changeset.Hole{Address: s.Name,
				Reason: fmt.Sprintf("%s %s step %s runs content its input does not list; read it in the pull request's diff", changeset.UnboundPrefix, s.Kind, s.Name)})
		}
		for _, field := range deployPaths(s) {
			b.named = true
			rel, ok := repoPath(root, field.path)
			if !ok {
				b.holes = append(b.holes, changeset.Hole{Address: s.Name,
					Reason: fmt.Sprintf("%s %s %s is outside the repository", changeset.UnboundPrefix, field.name, field.path)})
				continue
			}
			files, unbound, ignored, err := readTree(ctx, root, rel)
			if err != nil {
				return nil, fmt.Errorf("step %s: %s %s: %w", s.Name, field.name, field.path, err)
			}
			for _, why := range unbound {
				b.holes = append(b.holes, changeset.Hole{Address: s.Name,
					Reason: fmt.Sprintf("%s %s %s; read it in the pull request's diff", changeset.UnboundPrefix, field.name, why)})
			}
			if ignored {
				b.holes = append(b.holes, changeset.Hole{Address: s.Name,
					Reason: fmt.Sprintf("%s %s %s is a directory git ignores as a whole (a build output); read the sources of the build that writes it", changeset.UnboundPrefix, field.name, field.path)})
				continue
			}
			for _, f := range files {
				if !seen[f.Path] {
					seen[f.Path] = true
					b.files = append(b.files, f)
				}
			}
		}
	}
	slices.SortFunc(b.files, func(x, y boundFile) int { return strings.Compare(x.Path, y.Path) })
	return b, nil
}

type deployPath struct{ name, path string }

// deployPaths lists the literal paths of the field table a step names. A
// value wired from another step ("@Build.uri") or a stackOutput is a build
// output and is not read.
func deployPaths(s *Step) []deployPath {
	var out []deployPath
	fields := slices.Concat(boundFields, deployFields[s.Kind])
	for _, f := range fields {
		v, ok := s.Inputs[f].(string)
		if !ok || v == "" || strings.HasPrefix(v, "@") {
			continue
		}
		out = append(out, deployPath{f, v})
	}
	if s.Kind == "docker-build" {
		ctxDir, _ := s.Inputs["context"].(string)
		if df, ok := s.Inputs["dockerfile"].(string); ok && df != "" && ctxDir != "" && !strings.HasPrefix(ctxDir, "@") {
			out = append(out, deployPath{"dockerfile", path.Join(ctxDir, df)})
		}
	}
	return out
}

// repoPath makes p, relative to root or absolute, a slash path relative
// to root; false when it leaves the repository.
func repoPath(root, p string) (string, bool) {
	if filepath.IsAbs(p) {
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return "", false
		}
		p = rel
	}
	p = filepath.ToSlash(filepath.Clean(p))
	if p == ".." || strings.HasPrefix(p, "../") {
		return "", false
	}
	return p, true
}

// readTree hashes the file at rel, or the files under the directory rel
// that git does not ignore, each by path and bytes. A path that does not
// exist gives nothing; ignored says git ignores the directory as a whole.
// unbound says why a file was not read: it is not a regular file (a named
// pipe, a link to a device).
func readTree(ctx context.Context, root, rel string) (files []boundFile, unbound []string, ignored bool, err error) {
	full := filepath.Join(root, filepath.FromSlash(rel))
	info, err := os.Stat(full)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, false, nil
	}
	if err != nil {
		return nil, nil, false, err
	}
	if why, err := linkOut(root, rel); err != nil || why != "" {
		return nil, []string{why}, false, err
	}
	if !info.IsDir() {
		f, why, err := hashFile(ctx, root, rel)
		switch {
		case err != nil:
			return nil, nil, false, err
		case why != "":
			return nil, []string{why}, false, nil
		}
		return []boundFile{f}, nil, false, nil
	}
	if rel != "." {
		check := exec.CommandContext(ctx, "git", "check-ignore", "-q", "--", rel)
		check.Dir = root
		err := check.Run()
		var exit *exec.ExitError
		switch {
		case err == nil:
			return nil, nil, true, nil
		case errors.As(err, &exit) && exit.ExitCode() == 1:
		default:
			return nil, nil, false, fmt.Errorf("git check-ignore: %w", err)
		}
	}
	list := exec.CommandContext(ctx, "git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", rel)
	list.Dir = root
	var stderr bytes.Buffer
	list.Stderr = &stderr
	out, err := list.Output()
	if err != nil {
		return nil, nil, false, fmt.Errorf("git ls-files: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	for _, name := range strings.Split(string(out), "\x00") {
		if name == "" {
			continue
		}
		f, why, err := hashFile(ctx, root, name)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue // tracked but deleted in the work tree
		case err != nil:
			return nil, nil, false, err
		case why != "":
			unbound = append(unbound, why)
		default:
			files = append(files, f)
		}
	}
	return files, unbound, false, nil
}

// linkOut says, when the path rel in root resolves, through a symbolic
// link, to a place outside root, that it is a link out of the repository:
// such a path is not bound, as an absolute one is not.
func linkOut(root, rel string) (string, error) {
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(filepath.Join(root, filepath.FromSlash(rel)))
	if err != nil {
		return "", err
	}
	if _, ok := repoPath(realRoot, real); !ok {
		return rel + " is a link out of the repository", nil
	}
	return "", nil
}

// hashFile hashes the regular file at rel, or says why it is not read: it
// is no regular file, whose bytes a digest cannot name (a named pipe
// nobody writes, a link to /dev/zero).
func hashFile(ctx context.Context, root, rel string) (f boundFile, why string, err error) {
	full := filepath.Join(root, filepath.FromSlash(rel))
	if why, err := linkOut(root, rel); err != nil || why != "" {
		return boundFile{}, why, err
	}
	file, err := inputfile.Open(full)
	if errors.Is(err, inputfile.ErrNotRegular) {
		if info, err := os.Stat(full); err == nil {
			return boundFile{}, rel + " is " + inputfile.Kind(info) + ", not a regular file", nil
		}
	}
	if err != nil {
		return boundFile{}, "", err
	}
	defer file.Close()
	h := sha256.New()
	if _, err := io.Copy(h, inputfile.NewReader(ctx, file)); err != nil {
		return boundFile{}, "", fmt.Errorf("read %s: %w", rel, err)
	}
	return boundFile{Path: rel, SHA256: hex.EncodeToString(h.Sum(nil))}, "", nil
}

// compositionDigest is the digest of steps of c in env: the declaration,
// the environment and its vars, the steps' inputs as written and the files
// they deploy from.
func compositionDigest(c *Component, steps []*Step, env *Environment, b *bound) (string, error) {
	comp := composition{
		Component:   c.Name,
		DependsOn:   c.declared,
		Environment: env.Name,
		Vars:        env.Vars,
		Files:       b.files,
	}
	for _, s := range steps {
		comp.Steps = append(comp.Steps, stepDeclaration{Name: s.Name, Kind: s.Kind, Inputs: s.Inputs})
	}
	d, err := changeset.Digest(CompositionPrefix, comp)
	if err != nil {
		return "", fmt.Errorf("composition digest of %s: %w", c.Name, err)
	}
	return d, nil
}
