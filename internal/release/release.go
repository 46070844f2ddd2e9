// Package release builds the files of a captf release that clusterctl's
// provider contract asks for: infrastructure-components.yaml (config/release
// built with kustomize, the manager and runner images pinned to the
// release), metadata.yaml (the contract of each release series), and the
// cluster templates of clusterctl generate cluster: one file per flavor
// (cluster-template.yaml, cluster-template-<flavor>.yaml) and the
// ClusterClasses they name (clusterclass-<name>.yaml).
package release

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/template"

	"github.com/distribution/reference"
	"k8s.io/apimachinery/pkg/util/version"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
	"sigs.k8s.io/yaml"
)

// The files of a release, named as clusterctl looks for them, and its
// notes.
const (
	ComponentsFile = "infrastructure-components.yaml"
	MetadataFile   = "metadata.yaml"
	TemplateFile   = "cluster-template.yaml"
	NotesFile      = "release-notes.md"
)

// The images of a release are <registry>/<name>:<version>.
const (
	ManagerImageName = "captf-manager"
	RunnerImageName  = "captf-runner"
)

// The manager's Deployment and container in config/default, and the flag
// that names the runner image.
const (
	managerDeployment = "captf-manager"
	managerContainer  = "manager"
	runnerImageFlag   = "--runner-image="
)

// Options says which release to build.
type Options struct {
	// Config is the repository's config folder.
	Config string
	// Version is the release's version, a semantic version with a leading
	// v (v0.1.0), as clusterctl wants it; it tags the images.
	Version string
	// Registry is where the images are, e.g. ghcr.io/captf.
	Registry string
}

// Image returns the reference of the release's image name.
func (o Options) Image(name string) string {
	return o.Registry + "/" + name + ":" + o.Version
}

// Manifests builds the release's files, by file name.
func Manifests(opts Options) (map[string][]byte, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	dir := filepath.Join(opts.Config, "release")
	metadata, err := os.ReadFile(filepath.Join(dir, MetadataFile))
	if err != nil {
		return nil, err
	}
	if err := covers(metadata, opts.Version); err != nil {
		return nil, err
	}
	components, err := buildComponents(dir, opts)
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{
		ComponentsFile: components,
		MetadataFile:   metadata,
	}
	if err := addTemplates(dir, files); err != nil {
		return nil, err
	}
	notes, err := releaseNotes(opts, files)
	if err != nil {
		return nil, err
	}
	files[NotesFile] = notes
	return files, nil
}

// notesTemplate is the release's notes: how to install it, its images and
// their SBOMs, and how to sign and verify them (the release signs
// nothing: no signing key exists where it is built).
var notesTemplate = template.Must(template.New(NotesFile).Parse(`# captf {{.Version}}

## Install

` + "```" + `sh
clusterctl init --infrastructure captf:{{.Version}}
export CAPTF_MODULE_IMAGE=…  CAPTF_MACHINE_IMAGE=…
clusterctl generate cluster NAME --infrastructure captf:{{.Version}} [--flavor FLAVOR] | kubectl apply -f -
` + "```" + `

Flavors: {{range $i, $f := .Flavors}}{{if $i}}, {{end}}` + "`{{$f}}`" + `{{end}}. Their objects and
variables: docs/install.md, "Cluster flavors".

## Images
{{range .Images}}
- ` + "`{{.Ref}}`" + `{{end}}

Each image index carries an SBOM (SPDX 2.3 JSON) as an OCI referrer
(artifactType ` + "`application/spdx+json`" + `): ` + "`oras discover IMAGE`" + ` lists it.

## Signing and verifying

This release is not signed by its build: no signing key exists there.
Whoever publishes it signs by digest, with a key pair of their own (drop
` + "`--key`" + ` to sign keyless):

` + "```" + `sh
{{range .Images}}index=$(crane digest {{.Ref}})
cosign sign --yes --recursive --key cosign.key {{.Repo}}@$index
cosign attest --yes --key cosign.key --type spdxjson --predicate dist/images/{{.Name}}.spdx.json {{.Repo}}@$index
{{end}}` + "```" + `

Users check an image before they run it:

` + "```" + `sh
cosign verify --key cosign.pub IMAGE@sha256:<index digest>
cosign verify-attestation --key cosign.pub --type spdxjson IMAGE@sha256:<index digest>
` + "```" + `
`))

// releaseImage is one image of a release, for its notes: its name, its
// repository and its reference.
type releaseImage struct{ Name, Repo, Ref string }

func newImage(opts Options, name string) releaseImage {
	return releaseImage{Name: name, Repo: opts.Registry + "/" + name, Ref: opts.Image(name)}
}

// releaseNotes writes the notes of the release opts, whose files are
// files.
func releaseNotes(opts Options, files map[string][]byte) ([]byte, error) {
	flavors := []string{"default"}
	for name := range files {
		if f, ok := strings.CutPrefix(name, "cluster-template-"); ok {
			flavors = append(flavors, strings.TrimSuffix(f, ".yaml"))
		}
	}
	slices.Sort(flavors[1:])
	var b bytes.Buffer
	err := notesTemplate.Execute(&b, map[string]any{
		"Version": opts.Version,
		"Flavors": flavors,
		"Images":  []releaseImage{newImage(opts, ManagerImageName), newImage(opts, RunnerImageName)},
	})
	return b.Bytes(), err
}

// addTemplates adds the templates of dir to files: every flavor and
// every ClusterClass, the default flavor required.
func addTemplates(dir string, files map[string][]byte) error {
	var names []string
	for _, pattern := range []string{"cluster-template*.yaml", "clusterclass-*.yaml"} {
		m, err := filepath.Glob(filepath.Join(dir, pattern))
		if err != nil {
			return err
		}
		names = append(names, m...)
	}
	for _, path := range names {
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files[filepath.Base(path)] = b
	}
	if _, ok := files[TemplateFile]; !ok {
		return fmt.Errorf("%s has no %s, clusterctl's default flavor", dir, TemplateFile)
	}
	return nil
}

// Write writes files into dir, which it creates if needed.
func Write(dir string, files map[string][]byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func (o Options) validate() error {
	if o.Registry == "" {
		return errors.New("no registry")
	}
	if !strings.HasPrefix(o.Version, "v") {
		return fmt.Errorf("version %q: clusterctl wants a leading v, e.g. v0.1.0", o.Version)
	}
	if _, err := version.ParseSemantic(o.Version); err != nil {
		return fmt.Errorf("version: %w", err)
	}
	for _, name := range []string{ManagerImageName, RunnerImageName} {
		// Fully qualified: the registry must name a host, or a pull would
		// quietly go to Docker Hub.
		if _, err := reference.ParseNamed(o.Image(name)); err != nil {
			return fmt.Errorf("image %s: %w", o.Image(name), err)
		}
	}
	return nil
}

// covers checks that metadata.yaml names the release series of v, as
// clusterctl init does before it installs a provider.
func covers(metadata []byte, v string) error {
	var md struct {
		ReleaseSeries []struct {
			Major    uint   `json:"major"`
			Minor    uint   `json:"minor"`
			Contract string `json:"contract"`
		} `json:"releaseSeries"`
	}
	if err := yaml.Unmarshal(metadata, &md); err != nil {
		return fmt.Errorf("%s: %w", MetadataFile, err)
	}
	sv := version.MustParseSemantic(v)
	for _, s := range md.ReleaseSeries {
		if s.Major == sv.Major() && s.Minor == sv.Minor() && s.Contract != "" {
			return nil
		}
	}
	return fmt.Errorf("%s has no release series %d.%d with a contract: add it before releasing %s", MetadataFile, sv.Major(), sv.Minor(), v)
}

// buildComponents builds the kustomization dir and pins the manager's
// image and the runner image it passes to its Jobs.
func buildComponents(dir string, opts Options) ([]byte, error) {
	// kubectl apply -f creates in file order: the Namespace and the CRDs
	// first, the webhook configuration last (kustomize's legacy order).
	ko := krusty.MakeDefaultOptions()
	ko.Reorder = krusty.ReorderOptionLegacy
	resMap, err := krusty.MakeKustomizer(ko).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	var pinned bool
	for _, r := range resMap.Resources() {
		if r.GetKind() != "Deployment" || r.GetName() != managerDeployment {
			continue
		}
		if err := pinImages(&r.RNode, opts); err != nil {
			return nil, fmt.Errorf("deployment %s: %w", managerDeployment, err)
		}
		pinned = true
	}
	if !pinned {
		return nil, fmt.Errorf("%s has no Deployment %s", dir, managerDeployment)
	}
	return resMap.AsYaml()
}

func pinImages(dep *kyaml.RNode, opts Options) error {
	c, err := dep.Pipe(kyaml.Lookup("spec", "template", "spec", "containers"), kyaml.MatchElement("name", managerContainer))
	if err != nil {
		return err
	}
	if c == nil {
		return fmt.Errorf("no container %s", managerContainer)
	}
	if err := c.PipeE(kyaml.SetField("image", kyaml.NewStringRNode(opts.Image(ManagerImageName)))); err != nil {
		return err
	}
	args, err := c.Pipe(kyaml.Lookup("args"))
	if err != nil {
		return err
	}
	if args == nil {
		return fmt.Errorf("container %s has no args", managerContainer)
	}
	elems, err := args.Elements()
	if err != nil {
		return fmt.Errorf("args: %w", err)
	}
	var found bool
	for _, a := range elems {
		if strings.HasPrefix(a.YNode().Value, runnerImageFlag) {
			a.YNode().Value = runnerImageFlag + opts.Image(RunnerImageName)
			found = true
		}
	}
	if !found {
		return fmt.Errorf("container %s has no %s", managerContainer, strings.TrimSuffix(runnerImageFlag, "="))
	}
	return nil
}
