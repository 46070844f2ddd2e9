package cli

import (
	"io"

	"github.com/captf/captf/internal/preview"
	"github.com/captf/captf/internal/preview/arm"
	"github.com/captf/captf/internal/preview/cfn"
	"github.com/captf/captf/internal/preview/gcp"
	"github.com/captf/captf/internal/preview/kubectl"
	"github.com/captf/captf/internal/preview/terraform"
)

// capabilities are the deploy tools captf preview can plan, one entry per
// kind. A kind of spec 003's table that is not here is a step without plan
// (or, for a kind spec 003 says plans, a member that fails for want of
// its capability). Their diagnostics go to stderr; terraform's rendering
// of a plan is not printed, since the note is the preview's output.
func capabilities(stderr io.Writer) preview.Registry {
	return preview.Registry{
		&terraform.Capability{Stderr: stderr},
		cfn.New(),
		kubectl.Capability{},
		&arm.Capability{},
		&gcp.Capability{},
	}
}
