package render

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"slices"
	"testing"
)

var key = bytes.Repeat([]byte{5}, 32)

func req(mutate func(*Request)) Request {
	r := Request{
		StateSuffix: "captf-tfc-demo", Namespace: "default",
		Variables: map[string]Variable{
			"region": {Value: json.RawMessage(`"eu-west-1"`)},
			"tags":   {Value: json.RawMessage(`{"b": 2, "a": 12345678901234567890}`)},
			"token":  {Value: json.RawMessage(`"s3cr3t"`), Sensitive: true},
		},
		Image: "registry.example/net:1.0", Identity: "Secret/aws",
	}
	if mutate != nil {
		mutate(&r)
	}
	return r
}

func render(t *testing.T, r Request) *Root {
	t.Helper()
	root, err := Render(key, r)
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func TestRender(t *testing.T) {
	root := render(t, req(nil))
	want := `{"module":{"main":{"region":"${var.region}","source":"./module","tags":"${var.tags}","token":"${var.token}"}},` +
		`"output":{"captf_inputs_hash":{"value":"` + root.InputsHash + `"}},` +
		`"terraform":{"backend":{"kubernetes":{"namespace":"default","secret_suffix":"captf-tfc-demo"}}},` +
		`"variable":{"region":{},"tags":{},"token":{"sensitive":true}}}`
	if string(root.MainTF) != want {
		t.Errorf("main.tf.json\n got %s\nwant %s", root.MainTF, want)
	}
	if want := `{"region":"eu-west-1","tags":{"a":12345678901234567890,"b":2},"token":"s3cr3t"}`; string(root.Vars) != want {
		t.Errorf("terraform.tfvars.json\n got %s\nwant %s", root.Vars, want)
	}
	if bytes.Contains([]byte(root.InputsHash), []byte("s3cr3t")) || len(root.InputsHash) != len(HashPrefix)+64 {
		t.Errorf("hash %q", root.InputsHash)
	}
	// The durable inputs say which inputs they are.
	if h, err := RootInputsHash(root.MainTF); err != nil || h != root.InputsHash {
		t.Errorf("RootInputsHash: %q, %v; want %q", h, err, root.InputsHash)
	}
	if h, err := RootInputsHash([]byte(`{"output":{}}`)); err != nil || h != "" {
		t.Errorf("RootInputsHash of a root without the output: %q, %v", h, err)
	}
	if _, err := RootInputsHash([]byte(`{`)); err == nil {
		t.Error("RootInputsHash of a broken root: no error")
	}
}

func TestInputsHash(t *testing.T) {
	base := render(t, req(nil)).InputsHash
	cases := []struct {
		reason string
		r      Request
		equal  bool
	}{
		{"the same inputs", req(nil), true},
		{"key order and whitespace of a value", req(func(r *Request) {
			r.Variables["tags"] = Variable{Value: json.RawMessage(`{ "a":12345678901234567890 ,"b":2}`)}
		}), true},
		{"a value", req(func(r *Request) { r.Variables["region"] = Variable{Value: json.RawMessage(`"us-east-1"`)} }), false},
		{"a large integer float64 cannot tell apart", req(func(r *Request) {
			r.Variables["tags"] = Variable{Value: json.RawMessage(`{"a":12345678901234567891,"b":2}`)}
		}), false},
		{"sensitivity", req(func(r *Request) { r.Variables["token"] = Variable{Value: json.RawMessage(`"s3cr3t"`)} }), false},
		{"the image as written", req(func(r *Request) { r.Image = "registry.example/net:1.1" }), false},
		{"the identity", req(func(r *Request) { r.Identity = "Secret/gcp" }), false},
		{"the state location", req(func(r *Request) { r.StateSuffix = "captf-tfc-other" }), false},
		{"a moved boundary between image and identity", req(func(r *Request) {
			r.Image, r.Identity = "registry.example/net:1.0Secret", "/aws"
		}), false},
	}
	for _, c := range cases {
		if got := render(t, c.r).InputsHash; (got == base) != c.equal {
			t.Errorf("%s: equal = %v, want %v", c.reason, got == base, c.equal)
		}
	}
	other, err := Render(bytes.Repeat([]byte{6}, 32), req(nil))
	if err != nil || other.InputsHash == base {
		t.Error("two keys give the same hash")
	}
}

// TestInputsHashKept: with no value left out, the inputs hash is what
// every earlier release computed (the hash below was computed by the
// release before values could be left out), so an upgrade plans nothing
// again; the approval hash is the inputs hash.
func TestInputsHashKept(t *testing.T) {
	root := render(t, req(nil))
	if want := "h2:a96d38b7af7cb64351b2d622ab2ebe5c73a636a384d5f8333cddc908a9747f10"; root.InputsHash != want {
		t.Errorf("inputs hash %s, want %s", root.InputsHash, want)
	}
	if root.ApprovalHash != root.InputsHash {
		t.Errorf("approval hash %s, want the inputs hash %s", root.ApprovalHash, root.InputsHash)
	}
}

// TestLeftOut: an Unapproved value is out of the approval hash only;
// leaving it out (or no longer) is a change of the approval hash, and the
// values still reach the module.
func TestLeftOut(t *testing.T) {
	with := func(replicas, data string, unapproved bool) Request {
		return req(func(r *Request) {
			r.Variables["replicas"] = Variable{Value: json.RawMessage(replicas)}
			r.Variables["bootstrap"] = Variable{Value: json.RawMessage(data), Sensitive: true, Unapproved: unapproved}
		})
	}
	base := render(t, with(`3`, `"token-1"`, true))
	if base.ApprovalHash == base.InputsHash {
		t.Fatal("with an Unapproved value, the approval hash is the inputs hash")
	}
	if !slices.Equal(base.Unapproved, []string{"bootstrap"}) {
		t.Errorf("Unapproved %v, want [bootstrap]", base.Unapproved)
	}
	// The root records both; a root without a value left out of the
	// approval hash records its inputs hash as its approval hash.
	if h, err := RootApprovalHash(base.MainTF); err != nil || h != base.ApprovalHash {
		t.Errorf("RootApprovalHash = %q, %v; want %q", h, err, base.ApprovalHash)
	}
	if h, err := RootInputsHash(base.MainTF); err != nil || h != base.InputsHash {
		t.Errorf("RootInputsHash = %q, %v; want %q", h, err, base.InputsHash)
	}
	plain := render(t, req(nil))
	if h, err := RootApprovalHash(plain.MainTF); err != nil || h != plain.InputsHash || bytes.Contains(plain.MainTF, []byte(ApprovalOutput)) {
		t.Errorf("RootApprovalHash of a root with nothing left out = %q, %v; want its inputs hash, and no %s output", h, err, ApprovalOutput)
	}
	if !bytes.Contains(base.Vars, []byte(`"replicas":3`)) || !bytes.Contains(base.Vars, []byte(`"bootstrap":"token-1"`)) {
		t.Errorf("a value left out of the hashes does not reach the module: %s", base.Vars)
	}
	for _, c := range []struct {
		reason                string
		r                     Request
		sameInputs, sameAppro bool
	}{
		{"the same inputs", with(`3`, `"token-1"`, true), true, true},
		{"other replicas", with(`5`, `"token-1"`, true), false, false},
		{"rotated bootstrap data", with(`3`, `"token-2"`, true), false, true},
		{"both", with(`5`, `"token-2"`, true), false, false},
		{"bootstrap data no longer left out of the approval", with(`3`, `"token-1"`, false), true, false},
		{"another value", req(func(r *Request) {
			*r = with(`3`, `"token-1"`, true)
			r.Variables["region"] = Variable{Value: json.RawMessage(`"us-east-1"`)}
		}), false, false},
	} {
		got := render(t, c.r)
		if (got.InputsHash == base.InputsHash) != c.sameInputs || (got.ApprovalHash == base.ApprovalHash) != c.sameAppro {
			t.Errorf("%s: same inputs hash %v, same approval hash %v; want %v, %v", c.reason,
				got.InputsHash == base.InputsHash, got.ApprovalHash == base.ApprovalHash, c.sameInputs, c.sameAppro)
		}
	}
}

func TestRenderRefuses(t *testing.T) {
	if _, err := Render(key[:31], req(nil)); err == nil {
		t.Error("a short key was accepted")
	}
	for _, r := range []Request{
		req(func(r *Request) { r.Variables["source"] = Variable{Value: json.RawMessage(`1`)} }),
		req(func(r *Request) { r.Variables["has space"] = Variable{Value: json.RawMessage(`1`)} }),
		req(func(r *Request) { r.Variables["x"] = Variable{Value: json.RawMessage(`{`)} }),
		req(func(r *Request) { r.Variables["x"] = Variable{Value: json.RawMessage(`1 2`)} }),
	} {
		if _, err := Render(key, r); !errors.Is(err, ErrBadVariable) {
			t.Errorf("err = %v, want ErrBadVariable", err)
		}
	}
}

func TestStateInputsHash(t *testing.T) {
	gz := func(s string) []byte {
		var b bytes.Buffer
		w := gzip.NewWriter(&b)
		if _, err := w.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	cases := map[string]string{
		`{"outputs":{"captf_inputs_hash":{"value":"h2:abc","type":"string"},"other":{"value":"x"}}}`: "h2:abc",
		`{"outputs":{"other":{"value":"x"}}}`:                                                        "",
		`{"outputs":{"captf_inputs_hash":{"value":{"not":"ours"}}}}`:                                 "",
		`{"version":4}`: "",
	}
	for state, want := range cases {
		got, err := StateInputsHash(gz(state))
		if err != nil || got != want {
			t.Errorf("StateInputsHash(%s) = %q, %v; want %q", state, got, err, want)
		}
	}
	if _, err := StateInputsHash([]byte("not gzip")); err == nil {
		t.Error("a state that is not gzip was read")
	}
	// A chunked state: the hash is read across the chunks, which cut the
	// gzip stream anywhere (terraform's cut is 1 MiB).
	whole := gz(`{"outputs":{"captf_inputs_hash":{"value":"h2:abc"}}}`)
	if got, err := StateInputsHash(whole[:10], whole[10:20], whole[20:]); err != nil || got != "h2:abc" {
		t.Errorf("chunked state: %q, %v", got, err)
	}
	if _, err := StateInputsHash(whole[:10], whole[20:]); err == nil {
		t.Error("a state missing a chunk was read")
	}
}

func TestBackendRoot(t *testing.T) {
	got, err := BackendRoot("ns", "captf-tfc-a")
	if err != nil {
		t.Fatal(err)
	}
	want := `{"terraform":{"backend":{"kubernetes":{"namespace":"ns","secret_suffix":"captf-tfc-a"}}}}`
	if string(got) != want {
		t.Errorf("backend root:\n got %s\nwant %s", got, want)
	}
	// The same block as the module's root.
	root, err := Render(bytes.Repeat([]byte{1}, 32), Request{StateSuffix: "captf-tfc-a", Namespace: "ns"})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(root.MainTF, []byte(want[1:len(want)-1])) {
		t.Errorf("the root module's backend differs: %s", root.MainTF)
	}
}

// TestReplace: members to replace are bound by both hashes (as a set: in
// any order, the same), recorded in the root by the objects that asked,
// and handed to the Job by provider ID; a root with none is the root and
// hash of before (TestInputsHashKept), with no such output.
func TestReplace(t *testing.T) {
	plain := render(t, req(nil))
	if bytes.Contains(plain.MainTF, []byte(ReplacedOutput)) || plain.Replace != nil {
		t.Errorf("a root replacing nothing records %s or replaces %v", ReplacedOutput, plain.Replace)
	}
	a := Replacement{ProviderID: "aws:///z/i-1", Object: "uid-1"}
	b := Replacement{ProviderID: "aws:///z/i-2", Object: "uid-2"}
	one := render(t, req(func(r *Request) { r.Replace = []Replacement{a} }))
	both := render(t, req(func(r *Request) { r.Replace = []Replacement{b, a} }))
	again := render(t, req(func(r *Request) { r.Replace = []Replacement{a, b} }))
	other := render(t, req(func(r *Request) { r.Replace = []Replacement{{ProviderID: a.ProviderID, Object: "uid-3"}} }))
	hashes := map[string]string{"none": plain.InputsHash, "one": one.InputsHash, "both": both.InputsHash, "one asked by another object": other.InputsHash}
	seen := map[string]string{}
	for what, h := range hashes {
		if was, ok := seen[h]; ok {
			t.Errorf("%s and %s hash alike", what, was)
		}
		seen[h] = what
	}
	if both.InputsHash != again.InputsHash || both.ApprovalHash != both.InputsHash {
		t.Errorf("the same members in another order hash %s, not %s (approval %s)", again.InputsHash, both.InputsHash, both.ApprovalHash)
	}
	if !slices.Equal(both.Replace, []string{a.ProviderID, b.ProviderID}) {
		t.Errorf("Replace %v, want the provider IDs sorted", both.Replace)
	}
	var root struct {
		Output map[string]struct {
			Value json.RawMessage `json:"value"`
		} `json:"output"`
	}
	var got []string
	if err := json.Unmarshal(both.MainTF, &root); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(root.Output[ReplacedOutput].Value, &got); err != nil || !slices.Equal(got, []string{"uid-1", "uid-2"}) {
		t.Errorf("%s records %v, want the objects that asked, sorted", ReplacedOutput, got)
	}
	if !bytes.Equal(both.Vars, plain.Vars) {
		t.Error("replacing members changed the variables")
	}
}
