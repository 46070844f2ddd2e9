package kubectl

import "github.com/captf/captf/internal/preview/manifest"

// document is one object of the manifest.
type document = manifest.Document

// readManifest reads every document of the manifest file or directory
// (manifest.Read).
func readManifest(root, rel string) ([]document, error) { return manifest.Read(root, rel) }
