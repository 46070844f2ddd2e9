package runner

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	tfjson "github.com/hashicorp/terraform-json"

	"github.com/captf/captf/internal/inputfile"
	"github.com/captf/captf/internal/tfexec"
	"github.com/captf/captf/internal/tfplan"
	"github.com/captf/captf/pkg/fingerprint"
)

// SchemaCacheFile is the name of the CLI's provider schema cache inside
// StateDir.
const SchemaCacheFile = "provider-schemas.json"

// maxSchemaBytes bounds the schema JSON read from terraform or the cache.
const maxSchemaBytes = 512 << 20

// SchemaCache keeps the JSON of `providers schema -json` for a root, so
// that the CLI reads its saved plan files itself (internal/tfplan) instead
// of running show -json, which starts every provider again for its
// schema. The cache is valid while the binary, the TF_* environment, the
// CLI config, the lock file and the installed providers are those it was
// made with; with dev_overrides in the CLI config nothing is cached.
// Schemas hold no values.
type SchemaCache struct {
	// Path is the cache file, in the root's StateDir.
	Path string
}

// cached is the cache file's content.
type cached struct {
	Key string `json:"key"`
	// Version is the first line of the binary's version output, such as
	// "Terraform v1.11.4".
	Version string `json:"version"`
	// Schemas are the providers' schemas, for a binary whose plan files
	// captf reads.
	Schemas *tfjson.ProviderSchemas `json:"schemas,omitempty"`
}

func schemaKey(tf *tfexec.Terraform) (string, error) {
	h := sha256.New()
	if err := hashTools(h, tf); err != nil {
		return "", err
	}
	// A provider the CLI config's dev_overrides name is run from a
	// directory captf does not watch: no key, so nothing is cached.
	if cfg := environ(tf)["TF_CLI_CONFIG_FILE"]; cfg != "" {
		if b, err := inputfile.Read(context.Background(), cfg, MaxCLIConfigBytes); err == nil && bytes.Contains(b, []byte("dev_overrides")) {
			return "", nil
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// read returns what the cache holds for the binary and the providers tf
// runs with now, or an entry with only the key when it holds nothing for
// them. It runs no process: it can run while terraform plans.
func (c *SchemaCache) read(tf *tfexec.Terraform) *cached {
	key, err := schemaKey(tf)
	if err != nil || key == "" {
		return &cached{}
	}
	if b, err := readBounded(c.Path, maxSchemaBytes); err == nil {
		var old cached
		if json.Unmarshal(b, &old) == nil && old.Key == key {
			return &old
		}
	}
	return &cached{Key: key}
}

// complete returns got's schemas, asking terraform for what got lacks and
// caching it. A binary whose plan files captf does not read (see
// readable) has none: tfplan.ErrUnsupported.
func (c *SchemaCache) complete(ctx context.Context, tf *tfexec.Terraform, got *cached) (*tfjson.ProviderSchemas, error) {
	var err error
	if got.Version == "" {
		if got.Version, err = tf.Version(ctx); err != nil {
			return nil, err
		}
		got.Schemas = nil
		if !readable(got.Version) {
			c.save(tf, got)
		}
	}
	if !readable(got.Version) {
		return nil, fmt.Errorf("%w: %s", tfplan.ErrUnsupported, got.Version)
	}
	if got.Schemas == nil {
		var s tfjson.ProviderSchemas
		err = tf.ProvidersSchema(ctx, func(r io.Reader) error {
			b, err := io.ReadAll(io.LimitReader(r, maxSchemaBytes))
			if err != nil {
				return err
			}
			return json.Unmarshal(b, &s)
		})
		if err != nil {
			return nil, err
		}
		got.Schemas = &s
		c.save(tf, got)
	}
	return got.Schemas, nil
}

// readable says whether captf reads the plan files of the binary whose
// version line this is: terraform from 1.5 and OpenTofu from 1.6 (the
// plan file format of both, version 3; internal/tfplan is tested against
// terraform 1.11 and OpenTofu 1.12). Others go through show -json.
func readable(version string) bool {
	least := 5
	v, ok := strings.CutPrefix(version, "Terraform v")
	if !ok {
		least = 6
		v, ok = strings.CutPrefix(version, "OpenTofu v")
	}
	if !ok {
		return false
	}
	major, rest, _ := strings.Cut(v, ".")
	minor, _, _ := strings.Cut(rest, ".")
	n, err := strconv.Atoi(minor)
	return major == "1" && err == nil && n >= least
}

// save writes the cache; failing to is not an error, the next plan asks
// terraform again.
func (c *SchemaCache) save(tf *tfexec.Terraform, got *cached) {
	if got.Key == "" {
		return
	}
	if b, err := json.Marshal(got); err == nil && EnsureStateDir(tf.Dir) == nil {
		_ = writeReplace(c.Path, b)
	}
}

// drop removes the cache: the next plan asks terraform again.
func (c *SchemaCache) drop() { os.Remove(c.Path) }

// readBounded reads a regular file of at most max bytes.
func readBounded(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err == nil && int64(len(b)) > max {
		err = fmt.Errorf("%s: over %d bytes", path, max)
	}
	return b, err
}

// readPlan fingerprints a saved plan file read by captf itself, with the
// schemas of got (SchemaCache.read) or else terraform's, streamed into the
// fingerprint as show -json would be; it returns tfplan.ErrUnsupported, or
// another error, when show -json must do it.
func (r *Runner) readPlan(ctx context.Context, file string, got *cached) (*fingerprint.Result, map[string]string, error) {
	schemas, err := r.Schemas.complete(ctx, r.TF, got)
	if err != nil {
		return nil, nil, err
	}
	pr, pw := io.Pipe()
	var providers map[string]string
	var werr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		providers, werr = tfplan.Write(pw, file, schemas)
		pw.CloseWithError(werr)
	}()
	res, err := r.Hasher.Compute(pr)
	// Ends the writer should the fingerprint have stopped early.
	pr.CloseWithError(errors.New("the fingerprint stopped reading"))
	<-done
	if errors.Is(werr, tfplan.ErrNoSchema) {
		// Schemas older than the providers: ask terraform again next
		// time.
		r.Schemas.drop()
	}
	if werr != nil {
		return nil, nil, werr
	}
	if err != nil {
		return nil, nil, err
	}
	return res, providers, nil
}
