// Package ci runs the CI examples of examples/ci as their runners would:
// the commands of each job of the GitHub Actions workflow and of the GitLab
// CI pipeline, in order, on a fixture repository, with the real captf built
// from this tree and the real terraform. No hosted runner runs here, so
// three things stand in for one, each said where it is done: the forge's
// REST API is a test server answering the few calls captf-preview.sh makes
// in GitHub's and GitLab's shapes; the steps that install tools (setup-go,
// setup-terraform, "Install captf", GitLab's before_script) are skipped
// because the test's PATH already holds them; and actions/checkout is the
// fixture repository itself.
package ci

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"

	"github.com/captf/captf/internal/tftest"
)

// The fixture: one terraform root whose resource's input is the variable
// "color", planned as one component.
const (
	projectFile = "components:\n  infra:\n    steps:\n      - kind: terraform-apply\n        inputs: {root: infra}\n"
	rootFile    = `variable "color" {
  type    = string
  default = "%s"
}

resource "terraform_data" "paint" {
  input = var.color
}
`
)

// repo is the fixture repository a job runs in.
type repo struct {
	t   *testing.T
	dir string
	env []string
}

// newRepo makes the repository with the example's script where the
// examples expect it, and an environment whose PATH holds captf (built
// from this tree) and terraform.
func newRepo(t *testing.T) *repo {
	t.Helper()
	dir := t.TempDir()
	script, err := os.ReadFile("../../examples/ci/captf-preview.sh")
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "examples/ci/captf-preview.sh"), string(script), 0o755)
	write(t, filepath.Join(dir, "captf.yaml"), projectFile, 0o644)
	write(t, filepath.Join(dir, "infra/main.tf"), fmt.Sprintf(rootFile, "blue"), 0o644)
	write(t, filepath.Join(dir, ".gitignore"), ".captf/\n.terraform/\n*.tfstate*\n.terraform.lock.hcl\n", 0o644)

	bin := t.TempDir()
	// As the examples install them: captf, and beside it the preview
	// binary that `captf preview` hands off to.
	for _, cmd := range []string{"captf", "captf-preview"} {
		if out, err := exec.Command("go", "build", "-o", filepath.Join(bin, cmd), "../../cmd/"+cmd).CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", cmd, err, out)
		}
	}
	if err := os.Symlink(tftest.Terraform(t).Path, filepath.Join(bin, "terraform")); err != nil {
		t.Fatal(err)
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	r := &repo{t: t, dir: dir}
	r.env = append(tftest.Env(t),
		"PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"HOME="+t.TempDir(),
		"CAPTF_PREVIEW_KEY="+base64.StdEncoding.EncodeToString(key),
	)
	r.git("init", "-q", "-b", "main")
	r.commit("the fixture")
	return r
}

func write(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

func (r *repo) git(args ...string) string {
	r.t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.test"}, args...)...)
	cmd.Dir = r.dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		r.t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// commit commits every change and returns the commit's id.
func (r *repo) commit(msg string) string {
	r.t.Helper()
	r.git("add", "-A")
	r.git("commit", "-q", "--allow-empty", "-m", msg)
	return r.git("rev-parse", "HEAD")
}

// paint sets the color the next plan sees.
func (r *repo) paint(color string) {
	write(r.t, filepath.Join(r.dir, "infra/main.tf"), fmt.Sprintf(rootFile, color), 0o644)
}

// applied is the color terraform's state holds; "" before the first apply.
func (r *repo) applied() string {
	r.t.Helper()
	b, err := os.ReadFile(filepath.Join(r.dir, "infra/terraform.tfstate"))
	if errors.Is(err, os.ErrNotExist) {
		return ""
	}
	if err != nil {
		r.t.Fatal(err)
	}
	m := regexp.MustCompile(`"input":\s*\{\s*"value":\s*"([^"]*)"`).FindSubmatch(b)
	if m == nil {
		r.t.Fatalf("no terraform_data input in the state:\n%s", b)
	}
	return string(m[1])
}

// run runs one shell script of a job as a runner does (bash, stop at the
// first failing command) and returns its exit code.
func (r *repo) run(script string, env []string) int {
	r.t.Helper()
	cmd := exec.Command("bash", "-e", "-o", "pipefail", "-c", script)
	cmd.Dir = r.dir
	cmd.Env = append(append(os.Environ()[:0:0], r.env...), env...)
	out, err := cmd.CombinedOutput()
	r.t.Logf("$ %s\n%s", strings.TrimSpace(script), out)
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode()
	}
	if err != nil {
		r.t.Fatalf("run %q: %v", script, err)
	}
	return 0
}

// document is the digest of the change-set document the plan job kept.
func (r *repo) document() string {
	r.t.Helper()
	b, err := os.ReadFile(filepath.Join(r.dir, ".captf/preview/changeset.json"))
	if err != nil {
		r.t.Fatalf("the plan job kept no document: %v", err)
	}
	m := regexp.MustCompile(`"digest":\s*"(cs1:[0-9a-f]{64})"`).FindSubmatch(b)
	if m == nil {
		r.t.Fatalf("no digest in the document:\n%s", b)
	}
	return string(m[1])
}

// noteDigest is the digest a note shows.
func noteDigest(t *testing.T, note string) string {
	t.Helper()
	m := regexp.MustCompile("Digest: `(cs1:[0-9a-f]{64})`").FindStringSubmatch(note)
	if m == nil {
		t.Fatalf("no digest in the note:\n%s", note)
	}
	return m[1]
}

// expressions substitutes ${{ … }} in s from values; an expression it does
// not know fails the test, so the table stays complete.
func expressions(t *testing.T, s string, values map[string]string) string {
	t.Helper()
	return regexp.MustCompile(`\$\{\{\s*([^}]*?)\s*\}\}`).ReplaceAllStringFunc(s, func(m string) string {
		expr := regexp.MustCompile(`\$\{\{\s*([^}]*?)\s*\}\}`).FindStringSubmatch(m)[1]
		v, ok := values[expr]
		if !ok {
			t.Fatalf("the workflow uses ${{ %s }}, which the test does not provide", expr)
		}
		return v
	})
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// key is the preview key the jobs get, base64 as a CI secret holds it.
func (r *repo) key() string {
	for _, e := range r.env {
		if k, ok := strings.CutPrefix(e, "CAPTF_PREVIEW_KEY="); ok {
			return k
		}
	}
	r.t.Fatal("no preview key")
	return ""
}

// canary fails when the preview key reached a comment.
func (r *repo) canary(f *forge) {
	r.t.Helper()
	for _, c := range f.all() {
		if strings.Contains(c.Body, r.key()) {
			r.t.Errorf("comment %d holds the preview key", c.ID)
		}
	}
}
