// Package capabilities lists the deploy tools captf preview can plan. It is
// its own package so that only the preview binary (cmd/captf-preview) links
// them: the kubectl and CloudFormation clients' package initialisation
// alone took ~30 ms of every `captf plan` while they lived in one binary.
package capabilities

import (
	"io"

	"github.com/captf/captf/internal/preview"
	"github.com/captf/captf/internal/preview/arm"
	"github.com/captf/captf/internal/preview/cfn"
	"github.com/captf/captf/internal/preview/gcp"
	"github.com/captf/captf/internal/preview/kubectl"
	"github.com/captf/captf/internal/preview/terraform"
)

// All are the deploy tools captf preview can plan, one entry per kind. A
// kind of spec 003's table that is not here is a step without plan (or,
// for a kind spec 003 says plans, a member that fails for want of its
// capability). Their diagnostics go to stderr; terraform's rendering of a
// plan is not printed, since the note is the preview's output.
func All(stderr io.Writer) preview.Registry {
	return preview.Registry{
		&terraform.Capability{Stderr: stderr},
		cfn.New(),
		kubectl.Capability{},
		&arm.Capability{},
		&gcp.Capability{},
	}
}
