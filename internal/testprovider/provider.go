// Package testprovider is captftest, a terraform provider of captf's own for
// its tests. Its main resource, captftest_file, is a file in a directory:
// something a test can edit or delete behind terraform's back, so plans show
// real drift, in-place updates, replacements, imports and a sensitive
// attribute, with the real terraform and tofu. Its data source,
// captftest_directory, lists a directory's files, whoever made them: a
// pool's members, some made outside terraform.
//
// The provider is built by hack/build-test-provider.sh (or tftest.Provider)
// into a filesystem mirror under Address at Version.
package testprovider

import (
	"context"
	"os"
	"path/filepath"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

const (
	// Address is the provider's source address. It names a hostname so that
	// terraform (default registry.terraform.io) and tofu (default
	// registry.opentofu.org) look it up at the same path of a mirror.
	Address = "example.com/captf/captftest"
	// Version is the provider's only release.
	Version = "0.1.0"
	// RootEnv names the variable that gives the root directory when the
	// provider configuration does not.
	RootEnv = "CAPTF_TEST_PROVIDER_ROOT"
)

var _ provider.Provider = (*captftest)(nil)

// New returns the provider factory providerserver.Serve takes.
func New(version string) func() provider.Provider {
	return func() provider.Provider { return &captftest{version: version} }
}

type captftest struct {
	version string
}

type providerModel struct {
	Root types.String `tfsdk:"root"`
}

// root is what the provider hands its resources: the directory every
// captftest_file lives under.
type root string

func (p *captftest) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "captftest"
	resp.Version = p.version
}

func (p *captftest) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "Files in a directory, for captf's tests.",
		Attributes: map[string]schema.Attribute{
			"root": schema.StringAttribute{
				Optional:    true,
				Description: "Directory every file lives under. Defaults to $" + RootEnv + ".",
			},
		},
	}
}

func (p *captftest) Configure(ctx context.Context, req provider.ConfigureRequest, resp *provider.ConfigureResponse) {
	var cfg providerModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if cfg.Root.IsUnknown() {
		// Known at apply; a plan that needs it fails in the resource.
		return
	}
	dir := cfg.Root.ValueString()
	if dir == "" {
		dir = os.Getenv(RootEnv)
	}
	if dir == "" {
		resp.Diagnostics.AddError("No root directory", "Set root in the provider configuration or $"+RootEnv+".")
		return
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		resp.Diagnostics.AddError("Bad root directory", err.Error())
		return
	}
	resp.ResourceData, resp.DataSourceData = root(abs), root(abs)
}

func (p *captftest) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{newFile, newShape}
}

func (p *captftest) DataSources(context.Context) []func() datasource.DataSource {
	return []func() datasource.DataSource{newDirectory}
}
