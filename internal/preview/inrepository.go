package preview

import (
	"fmt"
	"path/filepath"
	"strings"
)

// InRepository resolves rel, a path a project file names, against the
// repository root and refuses one that leaves it: absolute, climbing out
// with "..", or through a symbolic link that points out. A pull request
// names its roots, manifests and templates inside the repository, and what
// lies outside is nothing the change shows a reviewer. Capabilities call it
// from CheckInputs, so such a path is bad input (exit 2), the same for
// every kind.
func InRepository(root, rel string) (string, error) {
	if filepath.IsAbs(rel) {
		return "", fmt.Errorf("%s is absolute; want a path relative to the repository", rel)
	}
	clean := filepath.Clean(rel)
	if leaves(clean) {
		return "", fmt.Errorf("%s leaves the repository", rel)
	}
	abs, err := filepath.Abs(filepath.Join(root, clean))
	if err != nil {
		return "", fmt.Errorf("%s: %w", rel, err)
	}
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", fmt.Errorf("repository root: %w", err)
	}
	// A path that does not exist yet cannot point anywhere; the capability
	// says it is missing when it reads it.
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		if r, err := filepath.Rel(realRoot, real); err != nil || leaves(r) {
			return "", fmt.Errorf("%s leaves the repository through a symbolic link", rel)
		}
	}
	return abs, nil
}

// leaves says whether a clean relative path climbs above its base.
func leaves(clean string) bool {
	return clean == ".." || strings.HasPrefix(clean, ".."+string(filepath.Separator))
}
