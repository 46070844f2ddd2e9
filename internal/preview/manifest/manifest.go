// Package manifest reads Kubernetes-style manifests (YAML or JSON
// documents of objects with apiVersion, kind and metadata.name) from a file
// or a directory of the repository, for the capabilities that apply them:
// kubectl-apply and gcp-apply (Config Connector).
package manifest

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// Document is one object of the manifest.
type Document struct {
	// Where is "<file>: document <n>" (file relative to the root, n from 1),
	// the prefix of every error about this object.
	Where      string
	APIVersion string
	Kind       string
	Name       string
	// Object is the document, decoded, whole numbers as int64. kubectl-apply
	// resolves it into what its apply sends (namespace defaulted, captf's
	// labels set).
	Object map[string]any
}

// manifestExts are the files a manifest directory contributes.
var manifestExts = []string{".yaml", ".yml", ".json"}

// File is one file a manifest was read from: its path relative to the
// root, with forward slashes, and the hex SHA-256 of its bytes.
type File struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
}

// Read reads every document of the manifest file, or of each
// .yaml, .yml and .json file directly in the manifest directory in name
// order (not its subdirectories, as kubectl apply -f DIR). rel is relative
// to root and may not leave it.
func Read(root, rel string) ([]Document, error) {
	docs, _, err := ReadFiles(root, rel)
	return docs, err
}

// ReadFiles is Read that also returns the files it read, each with the
// digest of the bytes its documents were decoded from.
func ReadFiles(root, rel string) ([]Document, []File, error) {
	if filepath.IsAbs(rel) || !filepath.IsLocal(rel) {
		return nil, nil, fmt.Errorf("inputs: manifest %q must be a path inside the repository, relative to its root", rel)
	}
	full := filepath.Join(root, rel)
	info, err := os.Stat(full)
	if err != nil {
		return nil, nil, fmt.Errorf("manifest: %w", err)
	}
	files := []string{rel}
	if info.IsDir() {
		entries, err := os.ReadDir(full)
		if err != nil {
			return nil, nil, fmt.Errorf("manifest: %w", err)
		}
		files = nil
		for _, e := range entries {
			if !e.IsDir() && slices.Contains(manifestExts, strings.ToLower(filepath.Ext(e.Name()))) {
				files = append(files, filepath.Join(rel, e.Name()))
			}
		}
		if len(files) == 0 {
			return nil, nil, fmt.Errorf("manifest: %s holds no .yaml, .yml or .json file", rel)
		}
	}
	var docs []Document
	var read []File
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			return nil, nil, fmt.Errorf("manifest: %w", err)
		}
		d, err := readFile(f, b)
		if err != nil {
			return nil, nil, err
		}
		docs = append(docs, d...)
		sum := sha256.Sum256(b)
		read = append(read, File{Path: filepath.ToSlash(f), SHA256: hex.EncodeToString(sum[:])})
	}
	return docs, read, nil
}

// readFile splits the bytes of one file into its YAML documents and
// checks each.
func readFile(rel string, b []byte) ([]Document, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	var docs []Document
	for n := 1; ; n++ {
		raw, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		where := fmt.Sprintf("%s: document %d", rel, n)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		objs, err := decodeDocument(where, raw)
		if err != nil {
			return nil, err
		}
		docs = append(docs, objs...)
	}
}

// decodeDocument decodes one YAML document: nothing for an empty one, the
// items of a List, or the object itself. Its errors never quote the
// document, which may be a Secret.
func decodeDocument(where string, raw []byte) ([]Document, error) {
	j, err := yaml.YAMLToJSONStrict(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: not YAML: %s", where, unquote(err.Error()))
	}
	var v any
	// utiljson keeps whole numbers as int64, as the API machinery expects.
	if err := utiljson.Unmarshal(j, &v); err != nil {
		return nil, fmt.Errorf("%s: not an object: %w", where, err)
	}
	if v == nil {
		return nil, nil
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: a document must be an object with apiVersion, kind and metadata, not a %s", where, jsonKind(v))
	}
	if kind, _ := obj["kind"].(string); strings.HasSuffix(kind, "List") && obj["items"] != nil {
		items, ok := obj["items"].([]any)
		if !ok {
			return nil, fmt.Errorf("%s: items must be a list", where)
		}
		var docs []Document
		for i, it := range items {
			m, ok := it.(map[string]any)
			itemWhere := fmt.Sprintf("%s: items.%d", where, i)
			if !ok {
				return nil, fmt.Errorf("%s: an item must be an object, not a %s", itemWhere, jsonKind(it))
			}
			d, err := checkObject(itemWhere, m)
			if err != nil {
				return nil, err
			}
			docs = append(docs, d)
		}
		return docs, nil
	}
	d, err := checkObject(where, obj)
	if err != nil {
		return nil, err
	}
	return []Document{d}, nil
}

// checkObject checks the fields every object needs.
func checkObject(where string, obj map[string]any) (Document, error) {
	d := Document{Where: where, Object: obj}
	var ok bool
	if d.APIVersion, ok = obj["apiVersion"].(string); !ok || d.APIVersion == "" {
		return Document{}, fmt.Errorf("%s: apiVersion is missing or not a string", where)
	}
	if d.Kind, ok = obj["kind"].(string); !ok || d.Kind == "" {
		return Document{}, fmt.Errorf("%s: kind is missing or not a string", where)
	}
	md, ok := obj["metadata"].(map[string]any)
	if !ok {
		return Document{}, fmt.Errorf("%s: metadata is missing or not a map", where)
	}
	if _, ok := md["generateName"]; ok {
		return Document{}, fmt.Errorf("%s: metadata.generateName is not supported: a server-side apply needs metadata.name", where)
	}
	if d.Name, ok = md["name"].(string); !ok || d.Name == "" {
		return Document{}, fmt.Errorf("%s: metadata.name is missing or not a string", where)
	}
	if ns, ok := md["namespace"]; ok {
		if s, isString := ns.(string); !isString || s == "" {
			return Document{}, fmt.Errorf("%s: metadata.namespace must be a non-empty string", where)
		}
	}
	if l, ok := md["labels"]; ok && l != nil {
		if _, isMap := l.(map[string]any); !isMap {
			return Document{}, fmt.Errorf("%s: metadata.labels must be a map", where)
		}
	}
	return d, nil
}

// quoted matches what a YAML error quotes from the document: a value, an
// anchor or a key, each of which may be a Secret's.
var quoted = regexp.MustCompile("`[^`]*`|'[^']*'|\"[^\"]*\"")

// unquote drops what a YAML error quotes from the document, keeping the line
// and what is wrong.
func unquote(msg string) string {
	return quoted.ReplaceAllString(msg, "(…)")
}

func jsonKind(v any) string {
	switch v.(type) {
	case []any:
		return "list"
	case string:
		return "string"
	case bool:
		return "boolean"
	case nil:
		return "null"
	default:
		return "number"
	}
}
