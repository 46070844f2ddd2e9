package cli

import "github.com/captf/captf/internal/preview"

// capabilities are the deploy tools captf preview can plan, one entry per
// kind. A kind of spec 003's table that is not here is a step without plan
// (or, for a kind spec 003 says plans, a member that fails for want of
// its capability).
var capabilities = preview.Registry{}
