package testprovider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// shape is the resource captftest_shape: it keeps in the state what its
// configuration says and touches nothing else. Its schema holds every
// kind of value terraform encodes in a plan (numbers, lists, sets, maps,
// a dynamic value, nested attributes and nested blocks of each nesting,
// sensitive attributes at several depths, values computed at apply), so
// tests can read plans of every shape. id and computed are known only
// after apply; a change of replace_key replaces the object.
type shape struct{}

func newShape() resource.Resource { return shape{} }

func (shape) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_shape"
}

func (shape) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	secret := func() schema.StringAttribute { return schema.StringAttribute{Optional: true, Sensitive: true} }
	resp.Schema = schema.Schema{
		Description: "Values of every shape, kept in the state.",
		Attributes: map[string]schema.Attribute{
			"id":          schema.StringAttribute{Computed: true},
			"name":        schema.StringAttribute{Required: true},
			"replace_key": schema.StringAttribute{Optional: true, PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()}},
			"size":        schema.NumberAttribute{Optional: true},
			"ratio":       schema.Float64Attribute{Optional: true},
			"enabled":     schema.BoolAttribute{Optional: true},
			"flags":       schema.ListAttribute{Optional: true, ElementType: types.BoolType},
			"tags":        schema.MapAttribute{Optional: true, ElementType: types.StringType},
			"labels":      schema.SetAttribute{Optional: true, ElementType: types.StringType},
			"password":    secret(),
			"payload":     schema.DynamicAttribute{Optional: true},
			"computed":    schema.ListAttribute{Computed: true, ElementType: types.StringType},
			"settings": schema.SingleNestedAttribute{Optional: true, Attributes: map[string]schema.Attribute{
				"mode":  schema.StringAttribute{Optional: true},
				"size":  schema.NumberAttribute{Optional: true},
				"token": secret(),
			}},
			"rules": schema.ListNestedAttribute{Optional: true, NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
				"port":   schema.NumberAttribute{Optional: true},
				"secret": secret(),
			}}},
			"members": schema.SetNestedAttribute{Optional: true, NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
				"name": schema.StringAttribute{Optional: true},
				"key":  secret(),
			}}},
			"endpoints": schema.MapNestedAttribute{Optional: true, NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
				"url": schema.StringAttribute{Optional: true},
			}}},
		},
		Blocks: map[string]schema.Block{
			"disk": schema.ListNestedBlock{NestedObject: schema.NestedBlockObject{Attributes: map[string]schema.Attribute{
				"size":  schema.NumberAttribute{Optional: true},
				"label": schema.StringAttribute{Optional: true},
				"key":   secret(),
			}}},
			"group": schema.SetNestedBlock{NestedObject: schema.NestedBlockObject{Attributes: map[string]schema.Attribute{
				"name":  schema.StringAttribute{Optional: true},
				"token": secret(),
			}}},
			"timeouts": schema.SingleNestedBlock{Attributes: map[string]schema.Attribute{
				"create": schema.StringAttribute{Optional: true},
			}},
		},
	}
}

func (shape) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	resp.State.Raw = req.Plan.Raw
	var name types.String
	resp.Diagnostics.Append(req.Plan.GetAttribute(ctx, path.Root("name"), &name)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), "shape-"+name.ValueString())...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("computed"), types.ListValueMust(types.StringType, []attr.Value{types.StringValue(name.ValueString())}))...)
}

func (shape) Read(_ context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	resp.State.Raw = req.State.Raw
}

// Update keeps the new configuration; id and computed stay.
func (shape) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	resp.State.Raw = req.Plan.Raw
	var id types.String
	var computed types.List
	resp.Diagnostics.Append(req.State.GetAttribute(ctx, path.Root("id"), &id)...)
	resp.Diagnostics.Append(req.State.GetAttribute(ctx, path.Root("computed"), &computed)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), id)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("computed"), computed)...)
}

func (shape) Delete(context.Context, resource.DeleteRequest, *resource.DeleteResponse) {}
