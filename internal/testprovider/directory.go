package testprovider

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

var _ datasource.DataSourceWithConfigure = (*directory)(nil)

// directory is the data source captftest_directory: the names of the
// files in DIRECTORY under the provider's root, whoever made them — what
// a pool module reads its members from, as a cloud's module reads the
// instances of an autoscaling group. Hidden files (secrets) are left out.
type directory struct {
	root root
}

func newDirectory() datasource.DataSource { return &directory{} }

type directoryModel struct {
	Directory types.String   `tfsdk:"directory"`
	Names     []types.String `tfsdk:"names"`
}

func (d *directory) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_directory"
}

func (d *directory) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "The files in a directory under the provider's root.",
		Attributes: map[string]schema.Attribute{
			"directory": schema.StringAttribute{
				Required:    true,
				Description: "Directory under the root, relative and clean (\".\" for the root itself).",
			},
			"names": schema.ListAttribute{
				Computed:    true,
				ElementType: types.StringType,
				Description: "The names of its files, sorted; none when it does not exist.",
			},
		},
	}
}

func (d *directory) Configure(_ context.Context, req datasource.ConfigureRequest, _ *datasource.ConfigureResponse) {
	if r, ok := req.ProviderData.(root); ok {
		d.root = r
	}
}

func (d *directory) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var m directoryModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if d.root == "" {
		resp.Diagnostics.AddError("No root directory", "provider has no root directory")
		return
	}
	dir := m.Directory.ValueString()
	if err := checkDirectory(dir); err != nil {
		resp.Diagnostics.AddError("Bad directory", err.Error())
		return
	}
	entries, err := os.ReadDir(filepath.Join(string(d.root), dir))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		resp.Diagnostics.AddError("Read the directory", err.Error())
		return
	}
	m.Names = []types.String{}
	for _, e := range entries {
		if e.Type().IsRegular() && !strings.HasPrefix(e.Name(), ".") {
			m.Names = append(m.Names, types.StringValue(e.Name()))
		}
	}
	slices.SortFunc(m.Names, func(a, b types.String) int { return strings.Compare(a.ValueString(), b.ValueString()) })
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}
