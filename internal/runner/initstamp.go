package runner

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/captf/captf/internal/inputfile"
	"github.com/captf/captf/internal/tfexec"
)

// InitStampFile is the name of the CLI's init stamp inside StateDir.
const InitStampFile = "init-stamp"

// InitStamp lets the CLI skip terraform init while nothing init reads has
// changed since the last init that succeeded in the root: the binary, the
// TF_* environment and the CLI config's content, the configuration files
// (and variable files) of the root and of every module init installed,
// the lock file, and what init wrote into the data directory (modules
// manifest, backend, workspace, installed providers). Any change in them,
// or a plan that fails after init was skipped, makes the next command init
// again. Should this list miss an input, terraform itself still refuses to
// plan a root that needs init (a changed module source or backend, a
// provider the lock file does not match): the command fails, it never plans
// the wrong configuration.
//
// The stamp is an HMAC under the plan key, as the plan records are: the
// files hashed may hold values (a backend's credentials, a tfvars file).
type InitStamp struct {
	// Path is the file that holds the stamp.
	Path string
	// Key keys the stamp's HMAC.
	Key []byte
}

// matches reports whether the root is initialised for exactly what it
// holds now.
func (s *InitStamp) matches(tf *tfexec.Terraform) bool {
	want, err := os.ReadFile(s.Path)
	if err != nil {
		return false
	}
	got, err := s.compute(tf)
	return err == nil && hmac.Equal(want, []byte(got))
}

// clear removes the stamp: the next command inits.
func (s *InitStamp) clear() { os.Remove(s.Path) }

// record writes the stamp of the root as it is after a successful init.
func (s *InitStamp) record(tf *tfexec.Terraform) error {
	sum, err := s.compute(tf)
	if err != nil {
		return err
	}
	return writeReplace(s.Path, []byte(sum))
}

// writeReplace writes b into a new file renamed over path: never through a
// link, never half written. A failure leaves path as it was.
func writeReplace(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err = errors.Join(err, f.Close()); err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

// configSuffixes are the files terraform and tofu read as configuration,
// and the variable files (tofu evaluates variables in module sources).
var configSuffixes = []string{".tf", ".tf.json", ".tofu", ".tofu.json", ".tfvars", ".tfvars.json"}

func (s *InitStamp) compute(tf *tfexec.Terraform) (string, error) {
	h := hmac.New(sha256.New, s.Key)
	if err := hashTools(h, tf); err != nil {
		return "", err
	}
	file := func(name, path string) { hashFile(h, name, path) }
	data := tf.DataDir()
	manifest := filepath.Join(data, "modules", "modules.json")
	file("modules manifest", manifest)
	file("backend", filepath.Join(data, "terraform.tfstate"))
	file("workspace", filepath.Join(data, "environment"))

	dirs := []string{"."}
	if b, err := os.ReadFile(manifest); err == nil {
		var m struct{ Modules []struct{ Dir string } }
		if err := json.Unmarshal(b, &m); err != nil {
			return "", fmt.Errorf("modules manifest: %w", err)
		}
		for _, mod := range m.Modules {
			dirs = append(dirs, mod.Dir)
		}
	}
	for _, d := range dirs {
		if !filepath.IsAbs(d) {
			d = filepath.Join(tf.Dir, d)
		}
		entries, err := os.ReadDir(d)
		if err != nil {
			hashField(h, "module dir missing "+d, nil)
			continue
		}
		for _, e := range entries {
			if e.IsDir() || !slices.ContainsFunc(configSuffixes, func(s string) bool { return strings.HasSuffix(e.Name(), s) }) {
				continue
			}
			file(filepath.Join(d, e.Name()), filepath.Join(d, e.Name()))
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// hashTools writes into h what decides the binary and the providers a
// root runs with: the binary, the TF_* environment and the CLI config's
// content, the lock file and the installed providers.
func hashTools(h hash.Hash, tf *tfexec.Terraform) error {
	field := func(name string, value []byte) { hashField(h, name, value) }
	file := func(name, path string) { hashFile(h, name, path) }

	info, err := os.Stat(tf.Bin)
	if err != nil {
		return err
	}
	field("binary", fmt.Appendf(nil, "%s %d %d %v", tf.Bin, info.Size(), info.ModTime().UnixNano(), info.Mode()))

	env := environ(tf)
	names := make([]string, 0, len(env))
	for k := range env {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		if k == "TF_CLI_CONFIG_FILE" {
			// captf may write its own config into a new directory each
			// run: what counts is the content.
			file("cli config", env[k])
			continue
		}
		field("env "+k, []byte(env[k]))
	}
	file("lock file", filepath.Join(tf.Dir, ".terraform.lock.hcl"))
	return tree(h, filepath.Join(tf.DataDir(), "providers"))
}

// hashField writes a named value into h, its length first.
func hashField(h hash.Hash, name string, value []byte) {
	fmt.Fprintf(h, "%s %d\n", name, len(value))
	h.Write(value)
}

// MaxCLIConfigBytes is the largest file the init stamp hashes: the CLI
// config (TF_CLI_CONFIG_FILE), the lock file, the modules manifest. captf
// refuses a larger CLI config; another file that large is hashed as
// missing, so init runs.
const MaxCLIConfigBytes = 1 << 20

// hashFile writes a file's content into h, or that it is missing (or not
// a regular file, or too large to be one terraform wrote).
func hashFile(h hash.Hash, name, path string) {
	b, err := inputfile.Read(context.Background(), path, MaxCLIConfigBytes)
	if err != nil {
		hashField(h, name+" missing", nil)
		return
	}
	hashField(h, name, b)
}

// environ is the TF_* environment terraform runs with: captf's process
// environment with tf.Env on top. terraform's logging settings are left
// out: they change no init.
func environ(tf *tfexec.Terraform) map[string]string {
	env := map[string]string{}
	for _, kv := range append(os.Environ(), tf.Env...) {
		k, v, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "TF_") && !strings.HasPrefix(k, "TF_LOG") {
			env[k] = v
		}
	}
	return env
}

// tree hashes the names, sizes, times and link targets under dir (the
// installed providers), not their content: init checks that content
// against the lock file, and a replaced binary changes its size or time.
func tree(h hash.Hash, dir string) error {
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		target, _ := os.Readlink(path)
		fmt.Fprintf(h, "provider %s %v %d %d %s\n", path, info.Mode(), info.Size(), info.ModTime().UnixNano(), target)
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(h, "no providers\n")
		return nil
	}
	return err
}
