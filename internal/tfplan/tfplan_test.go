package tfplan

import (
	"archive/zip"
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	tfjson "github.com/hashicorp/terraform-json"
	"github.com/zclconf/go-cty/cty"
	ctymsgpack "github.com/zclconf/go-cty/cty/msgpack"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/captf/captf/pkg/fingerprint"
)

const builtin = `provider["terraform.io/builtin/terraform"]`

// dataSchema is terraform_data's schema, as providers schema -json gives
// it.
var dataSchema = &tfjson.ProviderSchemas{FormatVersion: "1.0", Schemas: map[string]*tfjson.ProviderSchema{
	"terraform.io/builtin/terraform": {ResourceSchemas: map[string]*tfjson.Schema{
		"terraform_data": {Block: &tfjson.SchemaBlock{Attributes: map[string]*tfjson.SchemaAttribute{
			"id":               {AttributeType: cty.String, Computed: true},
			"input":            {AttributeType: cty.DynamicPseudoType, Optional: true},
			"output":           {AttributeType: cty.DynamicPseudoType, Computed: true},
			"triggers_replace": {AttributeType: cty.DynamicPseudoType, Optional: true},
		}}},
	}},
}}

var dataType = cty.Object(map[string]cty.Type{"id": cty.String, "input": cty.DynamicPseudoType, "output": cty.DynamicPseudoType, "triggers_replace": cty.DynamicPseudoType})

// msg builds a protobuf message from fields: a string, []byte or nested
// message is a bytes field, a uint64 a varint.
func msg(fields ...any) []byte {
	var b []byte
	for i := 0; i < len(fields); i += 2 {
		num := protowire.Number(fields[i].(int))
		switch v := fields[i+1].(type) {
		case string:
			b = protowire.AppendTag(b, num, protowire.BytesType)
			b = protowire.AppendString(b, v)
		case []byte:
			b = protowire.AppendTag(b, num, protowire.BytesType)
			b = protowire.AppendBytes(b, v)
		case uint64:
			b = protowire.AppendTag(b, num, protowire.VarintType)
			b = protowire.AppendVarint(b, v)
		}
	}
	return b
}

func dynamic(t testing.TB, v cty.Value, ty cty.Type) []byte {
	b, err := ctymsgpack.Marshal(v, ty)
	if err != nil {
		t.Fatal(err)
	}
	return msg(1, b)
}

// createData is the change of a terraform_data created with input.
func createData(t testing.TB, addr string, input cty.Value) []byte {
	after := cty.ObjectVal(map[string]cty.Value{
		"id": cty.UnknownVal(cty.String), "input": input, "output": cty.UnknownVal(cty.DynamicPseudoType), "triggers_replace": cty.NullVal(cty.DynamicPseudoType),
	})
	return msg(13, addr, 8, builtin, 9, msg(1, uint64(1), 2, dynamic(t, after, dataType)))
}

// planFile writes a plan file holding tfplan and returns its path.
func planFile(t testing.TB, tfplan []byte) string {
	var buf bytes.Buffer
	z := zip.NewWriter(&buf)
	w, err := z.Create("tfplan")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(tfplan); err != nil {
		t.Fatal(err)
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "plan.tfplan")
	if err := os.WriteFile(p, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRead(t *testing.T) {
	output := cty.StringVal("out")
	plan := msg(1, uint64(3), 14, "1.11.4",
		2, msg(1, "region", 2, dynamic(t, cty.StringVal("eu"), cty.DynamicPseudoType)),
		3, createData(t, "terraform_data.a", cty.ObjectVal(map[string]cty.Value{"n": cty.NumberIntVal(1)})),
		3, createData(t, `module.m["k.1"].terraform_data.b[0]`, cty.StringVal("s")),
		4, msg(1, "o", 2, msg(1, uint64(1), 2, dynamic(t, output, cty.DynamicPseudoType)), 3, uint64(1)),
	)
	var doc bytes.Buffer
	providers, err := Write(&doc, planFile(t, plan), dataSchema)
	if err != nil {
		t.Fatal(err)
	}
	res, err := fingerprint.Compute([]byte(strings.Repeat("k", 32)), bytes.NewReader(doc.Bytes()))
	if err != nil {
		t.Fatalf("%v\n%s", err, doc.Bytes())
	}
	if r := res.Report; r.Add != 2 || r.OutputChanges != 1 {
		t.Fatalf("report %+v of %s", r, doc.Bytes())
	}
	for _, want := range []string{`"variables":{"region":{"value":"eu"}}`, `"after":{"input":{"n":1},"triggers_replace":null}`, `"after_unknown":{"id":true,"output":true}`, `"o":{"actions":["create"],"before":null,"after":"out","after_unknown":false,"before_sensitive":true,"after_sensitive":true}`} {
		if !strings.Contains(doc.String(), want) {
			t.Errorf("no %s in %s", want, doc.Bytes())
		}
	}
	if got := providers[`module.m["k.1"].terraform_data.b[0]`]; got != builtin {
		t.Errorf("provider %q", got)
	}
}

func TestReadRefuses(t *testing.T) {
	create := createData(t, "terraform_data.a", cty.StringVal("x"))
	for _, c := range []struct {
		name string
		file func() string
		want error
	}{
		{"not a zip", func() string {
			p := filepath.Join(t.TempDir(), "p")
			if err := os.WriteFile(p, []byte("plan"), 0o600); err != nil {
				t.Fatal(err)
			}
			return p
		}, ErrUnsupported},
		{"no tfplan", func() string {
			var buf bytes.Buffer
			z := zip.NewWriter(&buf)
			if _, err := z.Create("tfstate"); err != nil {
				t.Fatal(err)
			}
			if err := z.Close(); err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(t.TempDir(), "p")
			if err := os.WriteFile(p, buf.Bytes(), 0o600); err != nil {
				t.Fatal(err)
			}
			return p
		}, ErrUnsupported},
		{"format version 2", func() string { return planFile(t, msg(1, uint64(2), 3, create)) }, ErrUnsupported},
		{"deferred changes", func() string { return planFile(t, msg(1, uint64(3), 27, msg(2, create))) }, ErrUnsupported},
		{"action invocations", func() string { return planFile(t, msg(1, uint64(3), 30, msg(1, "action.a.b"))) }, ErrUnsupported},
		{"an unknown action", func() string {
			return planFile(t, msg(1, uint64(3), 3, msg(13, "terraform_data.a", 8, builtin, 9, msg(1, uint64(42)))))
		}, ErrUnsupported},
		{"an unknown provider", func() string {
			return planFile(t, msg(1, uint64(3), 3, msg(13, "aws_s3_bucket.b", 8, `provider["registry.terraform.io/hashicorp/aws"]`, 9, msg(1, uint64(1)))))
		}, ErrNoSchema},
		{"a value of another schema", func() string {
			v := cty.ObjectVal(map[string]cty.Value{"other": cty.StringVal("x")})
			return planFile(t, msg(1, uint64(3), 3, msg(13, "terraform_data.a", 8, builtin, 9, msg(1, uint64(1), 2, dynamic(t, v, v.Type())))))
		}, ErrNoSchema},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Write(io.Discard, c.file(), dataSchema)
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
		})
	}
	// A plan cut short is an error, whatever the error; one cut between
	// two fields is a valid message, which only the zip's checksum (here
	// of the cut bytes) cannot tell.
	whole := msg(1, uint64(3), 3, create, 3, create)
	for n := 1; n < len(whole); n++ {
		_, err := Write(io.Discard, planFile(t, whole[:n]), dataSchema)
		if err == nil && n != 2 && n != len(whole)/2+1 {
			t.Errorf("a plan cut at %d of %d bytes was read", n, len(whole))
		}
	}
	// Fields out of their order.
	if _, err := Write(io.Discard, planFile(t, msg(1, uint64(3), 3, create, 4, msg(1, "o", 2, msg(1, uint64(0), 2, dynamic(t, cty.True, cty.DynamicPseudoType))), 3, create)), dataSchema); !errors.Is(err, ErrUnsupported) {
		t.Errorf("fields out of order: %v", err)
	}
}

// FuzzRead feeds broken plans to the reader: an error, never a panic.
func FuzzRead(f *testing.F) {
	f.Add(msg(1, uint64(3), 3, createData(f, "terraform_data.a", cty.ObjectVal(map[string]cty.Value{"k": cty.ListVal([]cty.Value{cty.NumberIntVal(1)})}))))
	f.Add(msg(1, uint64(3), 4, msg(1, "o", 2, msg(1, uint64(3), 2, dynamic(f, cty.True, cty.DynamicPseudoType), 2, dynamic(f, cty.UnknownVal(cty.String), cty.DynamicPseudoType)))))
	f.Fuzz(func(t *testing.T, tfplan []byte) {
		d := &writer{out: io.Discard, schemas: dataSchema, dec: newDecoder(), types: map[typeKey]cty.Type{}, providers: map[string]string{}}
		if topFields(bufio.NewReader(bytes.NewReader(tfplan)), d.field) == nil {
			_ = d.end()
		}
	})
}

// TestImporting reads an import as terraform writes it (an id, or that it
// is unknown, or an identity in field 3) and as OpenTofu does (an identity
// in field 2).
func TestImporting(t *testing.T) {
	identity := dynamic(t, cty.ObjectVal(map[string]cty.Value{"id": cty.StringVal("i")}), cty.Object(map[string]cty.Type{"id": cty.String}))
	for _, c := range []struct {
		name string
		msg  []byte
		want importing
	}{
		{"id", msg(1, "i-1"), importing{id: "i-1"}},
		{"unknown", msg(2, uint64(1)), importing{unknown: true}},
		{"terraform identity", msg(3, identity), importing{identity: identity}},
		{"tofu identity", msg(2, identity), importing{identity: identity}},
	} {
		ch, err := decodeChange(msg(1, uint64(1), 5, c.msg))
		if err != nil {
			t.Fatal(err)
		}
		got := *ch.importing
		if got.id != c.want.id || got.unknown != c.want.unknown || (len(got.identity) > 0) != (len(c.want.identity) > 0) {
			t.Errorf("%s: got %+v", c.name, got)
		}
	}
}
