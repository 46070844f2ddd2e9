package testprovider

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// secretSuffix ends the name of the file beside each managed file that
// holds its secret. Names ending in it are refused.
const secretSuffix = ".captftest-secret"

var (
	_ resource.ResourceWithConfigure      = (*file)(nil)
	_ resource.ResourceWithImportState    = (*file)(nil)
	_ resource.ResourceWithValidateConfig = (*file)(nil)
)

// file is the resource captftest_file: the file NAME in DIRECTORY under the
// provider's root, holding CONTENT with permissions MODE. A SECRET, when
// set, is kept in the hidden file .NAME.captftest-secret beside it (mode
// 0600), so it too can drift.
type file struct {
	root root
}

func newFile() resource.Resource { return &file{} }

type fileModel struct {
	ID        types.String `tfsdk:"id"`
	Directory types.String `tfsdk:"directory"`
	Name      types.String `tfsdk:"name"`
	Content   types.String `tfsdk:"content"`
	Mode      types.String `tfsdk:"mode"`
	Secret    types.String `tfsdk:"secret"`
}

func (r *file) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_file"
}

func (r *file) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	replace := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	resp.Schema = schema.Schema{
		Description: "A file under the provider's root directory.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				Computed:      true,
				Description:   "DIRECTORY/NAME, the id to import by.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"directory": schema.StringAttribute{
				Required:      true,
				Description:   "Directory under the root, relative and clean (\".\" for the root itself).",
				PlanModifiers: replace,
			},
			"name": schema.StringAttribute{
				Required:      true,
				Description:   "File name, without a separator.",
				PlanModifiers: replace,
			},
			"content": schema.StringAttribute{
				Required:    true,
				Description: "What the file holds; changed in place.",
			},
			"mode": schema.StringAttribute{
				Optional:      true,
				Computed:      true,
				Default:       stringdefault.StaticString("0644"),
				Description:   "Permissions in octal, e.g. 0600; a change replaces the file.",
				PlanModifiers: replace,
			},
			"secret": schema.StringAttribute{
				Optional:    true,
				Sensitive:   true,
				Description: "A sensitive value kept beside the file; changed in place.",
			},
		},
	}
}

func (r *file) Configure(_ context.Context, req resource.ConfigureRequest, _ *resource.ConfigureResponse) {
	if d, ok := req.ProviderData.(root); ok {
		r.root = d
	}
}

func (r *file) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var m fileModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if known(m.Directory) {
		if err := checkDirectory(m.Directory.ValueString()); err != nil {
			resp.Diagnostics.AddAttributeError(path.Root("directory"), "Bad directory", err.Error())
		}
	}
	if known(m.Name) {
		if err := checkName(m.Name.ValueString()); err != nil {
			resp.Diagnostics.AddAttributeError(path.Root("name"), "Bad name", err.Error())
		}
	}
	if known(m.Mode) {
		if _, err := parseMode(m.Mode.ValueString()); err != nil {
			resp.Diagnostics.AddAttributeError(path.Root("mode"), "Bad mode", err.Error())
		}
	}
}

func known(v types.String) bool { return !v.IsNull() && !v.IsUnknown() }

func (r *file) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m fileModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	p, err := r.locate(m.Directory.ValueString(), m.Name.ValueString())
	if err != nil {
		resp.Diagnostics.AddError("Cannot create file", err.Error())
		return
	}
	mode, err := parseMode(m.Mode.ValueString())
	if err != nil {
		resp.Diagnostics.AddError("Cannot create file", err.Error())
		return
	}
	if err := create(p, m.Content.ValueString(), mode); err != nil {
		resp.Diagnostics.AddError("Cannot create file", err.Error())
		return
	}
	if err := writeSecret(p, m.Secret); err != nil {
		resp.Diagnostics.AddError("Cannot write secret", err.Error())
		return
	}
	m.ID = types.StringValue(id(m.Directory.ValueString(), m.Name.ValueString()))
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// Read takes the file as it is on disk: edits made outside terraform show
// as drift, and a missing file leaves the state, so the next plan creates it.
func (r *file) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m fileModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	p, err := r.locate(m.Directory.ValueString(), m.Name.ValueString())
	if err != nil {
		resp.Diagnostics.AddError("Cannot read file", err.Error())
		return
	}
	fi, err := os.Stat(p)
	if errors.Is(err, fs.ErrNotExist) {
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("Cannot read file", err.Error())
		return
	}
	b, err := os.ReadFile(p)
	if err != nil {
		resp.Diagnostics.AddError("Cannot read file", err.Error())
		return
	}
	secret, err := readSecret(p)
	if err != nil {
		resp.Diagnostics.AddError("Cannot read secret", err.Error())
		return
	}
	m.ID = types.StringValue(id(m.Directory.ValueString(), m.Name.ValueString()))
	m.Content = types.StringValue(string(b))
	m.Mode = types.StringValue(fmt.Sprintf("%04o", fi.Mode().Perm()))
	m.Secret = secret
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// Update changes content and secret; every other attribute replaces.
func (r *file) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var m fileModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	p, err := r.locate(m.Directory.ValueString(), m.Name.ValueString())
	if err != nil {
		resp.Diagnostics.AddError("Cannot update file", err.Error())
		return
	}
	// O_TRUNC without O_CREATE: a file deleted since the refresh is an
	// error, not silently made again with the default permissions.
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		resp.Diagnostics.AddError("Cannot update file", err.Error())
		return
	}
	_, err = f.WriteString(m.Content.ValueString())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		resp.Diagnostics.AddError("Cannot update file", err.Error())
		return
	}
	if err := writeSecret(p, m.Secret); err != nil {
		resp.Diagnostics.AddError("Cannot write secret", err.Error())
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *file) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var m fileModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	p, err := r.locate(m.Directory.ValueString(), m.Name.ValueString())
	if err != nil {
		resp.Diagnostics.AddError("Cannot delete file", err.Error())
		return
	}
	for _, f := range []string{p, secretPath(p)} {
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			resp.Diagnostics.AddError("Cannot delete file", err.Error())
			return
		}
	}
}

// ImportState takes an id DIRECTORY/NAME (NAME alone for the root); Read
// then fills in the rest from the file.
func (r *file) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	dir, name, err := splitID(req.ID)
	if err != nil {
		resp.Diagnostics.AddError("Bad import id", err.Error())
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), id(dir, name))...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("directory"), dir)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), name)...)
}

// locate returns the file's path under the provider's root.
func (r *file) locate(dir, name string) (string, error) {
	if r.root == "" {
		return "", errors.New("provider has no root directory")
	}
	if err := checkDirectory(dir); err != nil {
		return "", err
	}
	if err := checkName(name); err != nil {
		return "", err
	}
	return filepath.Join(string(r.root), dir, name), nil
}

// checkDirectory accepts a relative, clean path that stays under the root,
// so that a directory has one spelling and one id.
func checkDirectory(dir string) error {
	switch {
	case dir == "":
		return errors.New(`directory is empty: use "." for the root`)
	case filepath.IsAbs(dir):
		return fmt.Errorf("directory %q is absolute: give it relative to the root", dir)
	case filepath.Clean(dir) != dir:
		return fmt.Errorf("directory %q is not clean: write %q", dir, filepath.Clean(dir))
	case dir == ".." || strings.HasPrefix(dir, "../"):
		return fmt.Errorf("directory %q leaves the root", dir)
	}
	return nil
}

func checkName(name string) error {
	switch {
	case name == "" || name == "." || name == "..":
		return fmt.Errorf("name %q is not a file name", name)
	case strings.ContainsRune(name, '/'):
		return fmt.Errorf("name %q holds a separator", name)
	case strings.HasSuffix(name, secretSuffix):
		return fmt.Errorf("name %q ends in %s, kept for secrets", name, secretSuffix)
	}
	return nil
}

func parseMode(s string) (os.FileMode, error) {
	if len(s) != 4 || s[0] != '0' {
		return 0, fmt.Errorf("mode %q is not four octal digits such as 0644", s)
	}
	v, err := strconv.ParseUint(s, 8, 32)
	if err != nil {
		return 0, fmt.Errorf("mode %q is not four octal digits such as 0644", s)
	}
	return os.FileMode(v), nil
}

func id(dir, name string) string {
	if dir == "." {
		return name
	}
	return dir + "/" + name
}

// splitID is the inverse of id.
func splitID(s string) (dir, name string, err error) {
	dir, name = ".", s
	if i := strings.LastIndexByte(s, '/'); i >= 0 {
		dir, name = s[:i], s[i+1:]
	}
	if err := checkDirectory(dir); err != nil {
		return "", "", err
	}
	if err := checkName(name); err != nil {
		return "", "", err
	}
	if c := id(dir, name); c != s {
		return "", "", fmt.Errorf("id %q is not clean: write %q", s, c)
	}
	return dir, name, nil
}

func create(p, content string, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s exists already: import it", p)
	}
	if err != nil {
		return err
	}
	_, err = f.WriteString(content)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	// The umask may have taken bits away.
	return os.Chmod(p, mode)
}

func secretPath(p string) string {
	return filepath.Join(filepath.Dir(p), "."+filepath.Base(p)+secretSuffix)
}

func writeSecret(p string, secret types.String) error {
	sp := secretPath(p)
	if secret.IsNull() {
		if err := os.Remove(sp); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	return os.WriteFile(sp, []byte(secret.ValueString()), 0o600)
}

func readSecret(p string) (types.String, error) {
	b, err := os.ReadFile(secretPath(p))
	if errors.Is(err, fs.ErrNotExist) {
		return types.StringNull(), nil
	}
	if err != nil {
		return types.StringNull(), err
	}
	return types.StringValue(string(b)), nil
}
