package modulelint

import (
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	hcljson "github.com/hashicorp/hcl/v2/json"

	"github.com/captf/captf/internal/modulecontract"
)

func expr(t *testing.T, src string) hcl.Expression {
	t.Helper()
	e, diags := hclsyntax.ParseExpression([]byte(src), "t.tf", hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatalf("%s: %v", src, diags)
	}
	return e
}

// TestJudge: what the text of an output's value tells, judged against the
// kind the manager reads; "" where it tells nothing wrong, or nothing.
func TestJudge(t *testing.T) {
	cases := []struct {
		kind modulecontract.Kind
		src  string
		want string
	}{
		// Nothing is judged that depends on a reference or a function.
		{modulecontract.KindString, `var.host`, ""},
		{modulecontract.KindString, `lookup(var.m, "k")`, ""},
		{modulecontract.KindString, `var.a ? 1 : var.b`, ""},
		{modulecontract.KindString, `null`, ""},
		{modulecontract.KindStringList, `[for x in var.l : x]`, ""},
		{modulecontract.KindStringList, `aws_instance.a[*].id`, ""},

		{modulecontract.KindString, `"api.${var.env}.example.com"`, ""},
		{modulecontract.KindString, `format("%s.example.com", var.env)`, ""},
		{modulecontract.KindString, `6443`, "the value is a number"},
		{modulecontract.KindString, `{ host = "a" }`, "the value is an object"},
		{modulecontract.KindString, `tolist(var.l)`, "the value is a list"},
		{modulecontract.KindString, `var.a ? "x" : null`, ""},
		{modulecontract.KindString, `var.a ? 1 : 2`, "the value is a number"},
		{modulecontract.KindNumber, `length(var.l)`, ""},
		{modulecontract.KindNumber, `3`, ""},
		{modulecontract.KindNumber, `"3"`, "the value is a string"},
		{modulecontract.KindNumber, `tostring(3)`, "the value is a string"},
		{modulecontract.KindObject, `{ a = var.a }`, ""},
		{modulecontract.KindObject, `tomap(var.m)`, ""},
		{modulecontract.KindObject, `{ for k, v in var.m : k => v }`, ""},
		{modulecontract.KindObject, `["a"]`, "the value is a list"},

		{modulecontract.KindStringMap, `{ for i, n in aws_instance.n : n.id => "aws_instance.n[${i}]" }`, ""},
		{modulecontract.KindStringMap, `{ "aws:///z/i-1" = "aws_instance.n[0]" }`, ""},
		{modulecontract.KindStringMap, `var.a ? { a = "x" } : null`, ""},
		{modulecontract.KindStringMap, `["aws_instance.n[0]"]`, "the value is a list"},
		{modulecontract.KindStringMap, `{ a = 1 }`, `entry "a" is a number`},

		{modulecontract.KindPort, `6443`, ""},
		{modulecontract.KindPort, `"6443"`, ""},
		{modulecontract.KindPort, `"${var.port}"`, ""},
		{modulecontract.KindPort, `tonumber(var.port)`, ""},
		{modulecontract.KindPort, `0`, "the value is not a port number (1 to 65535)"},
		{modulecontract.KindPort, `70000`, "the value is not a port number (1 to 65535)"},
		{modulecontract.KindPort, `64.5`, "the value is not a port number (1 to 65535)"},
		{modulecontract.KindPort, `"64a"`, "the value is a string that is not a port number"},
		{modulecontract.KindPort, `"99999999999999999999"`, "the value is a string that is not a port number"},
		{modulecontract.KindPort, `""`, "the value is a string that is not a port number"},
		{modulecontract.KindPort, `true`, "the value is a bool"},

		{modulecontract.KindStringList, `["a", var.b]`, ""},
		{modulecontract.KindStringList, `[]`, ""},
		{modulecontract.KindStringList, `["a", 1]`, "entry 1 is a number"},
		{modulecontract.KindStringList, `"a"`, "the value is a string"},

		{modulecontract.KindHealth, `"pending"`, ""},
		{modulecontract.KindHealth, `"unknown"`, ""},
		{modulecontract.KindHealth, `{ state = "failed", reason = var.r }`, ""},
		{modulecontract.KindHealth, `{ state = var.s }`, ""},
		{modulecontract.KindHealth, `"ok"`, `the value is not "running", "pending", "failed" or "unknown"`},
		{modulecontract.KindHealth, `{ status = "running" }`, "the value has no state"},
		{modulecontract.KindHealth, `{ state = 1 }`, "its state is a number"},
		{modulecontract.KindHealth, `["running"]`, "the value is a list"},

		{modulecontract.KindFailureDomains, `["a", "b"]`, ""},
		{modulecontract.KindFailureDomains, `["${var.env}-a", "${var.env}-b"]`, ""},
		{modulecontract.KindFailureDomains, `[{ name = "a" }, { name = var.b, control_plane = false, attributes = { zone = "z" } }]`, ""},
		{modulecontract.KindFailureDomains, `{ a = { control_plane = true }, b = {} }`, ""},
		{modulecontract.KindFailureDomains, `{ a = var.a }`, ""},
		{modulecontract.KindFailureDomains, `"a"`, "the value is a string"},
		{modulecontract.KindFailureDomains, `["a", { name = "b" }]`, "the value mixes names and objects"},
		{modulecontract.KindFailureDomains, `["a", 1]`, "entry 1 is a number"},
		{modulecontract.KindFailureDomains, `["a", "a"]`, "entry 1 repeats a name"},
		{modulecontract.KindFailureDomains, `[""]`, "entry 0 has an empty name"},
		{modulecontract.KindFailureDomains, `[{ name = "a" }, { name = "a" }]`, "entry 1 repeats a name"},
		{modulecontract.KindFailureDomains, `[{ zone = "a" }]`, "entry 0 has no name"},
		{modulecontract.KindFailureDomains, `[{ name = 1 }]`, "entry 0's name is a number"},
		{modulecontract.KindFailureDomains, `{ a = "x" }`, `entry "a" is a string`},
		{modulecontract.KindFailureDomains, `{ a = { control_plane = "yes" } }`, `entry "a"'s control_plane is a string`},
		{modulecontract.KindFailureDomains, `{ a = { attributes = ["z"] } }`, `entry "a"'s attributes are a list`},
		{modulecontract.KindFailureDomains, `{ a = { attributes = { zone = 1 } } }`, `entry "a"'s attribute "zone" is a number`},

		{modulecontract.KindAddresses, `[{ type = "InternalIP", address = var.ip }]`, ""},
		{modulecontract.KindAddresses, `[for ip in var.ips : { type = "InternalIP", address = ip }]`, ""},
		{modulecontract.KindAddresses, `"10.0.0.1"`, "the value is a string"},
		{modulecontract.KindAddresses, `["10.0.0.1"]`, "entry 0 is a string"},
		{modulecontract.KindAddresses, `[{ address = "10.0.0.1" }]`, "entry 0 has no type"},
		{modulecontract.KindAddresses, `[{ type = "InternalIP" }]`, "entry 0 has no address"},
		{modulecontract.KindAddresses, `[{ type = 1, address = "a" }]`, "entry 0's type is a number"},
		{modulecontract.KindAddresses, `[{ type = "InternalIP", address = 1 }]`, "entry 0's address is a number"},
	}
	for _, tc := range cases {
		if got := judge(tc.kind, static(expr(t, tc.src))); got != tc.want {
			t.Errorf("judge(%v, %s) = %q, want %q", tc.kind, tc.src, got, tc.want)
		}
	}
}

// TestStaticJSON: in JSON syntax a string is a template, as terraform
// reads it, not the text it holds.
func TestStaticJSON(t *testing.T) {
	cases := []struct {
		src  string
		want string
	}{
		{`{"v": "${var.port}"}`, ""},
		{`{"v": "https"}`, "the value is a string that is not a port number"},
		{`{"v": ["${var.a}"]}`, "the value is a list"},
	}
	for _, tc := range cases {
		f, diags := hcljson.Parse([]byte(tc.src), "t.tf.json")
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		attrs, _ := f.Body.JustAttributes()
		if got := judge(modulecontract.KindPort, static(attrs["v"].Expr)); got != tc.want {
			t.Errorf("judge(port, %s) = %q, want %q", tc.src, got, tc.want)
		}
	}
}

// TestAccepts: a variable's type takes the manager's value as it is, or
// the variable is refused.
func TestAccepts(t *testing.T) {
	cases := []struct {
		kind modulecontract.Kind
		typ  string
		want bool
	}{
		{modulecontract.KindString, "any", true},
		{modulecontract.KindString, "string", true},
		{modulecontract.KindString, "number", false},
		{modulecontract.KindBool, "bool", true},
		{modulecontract.KindBool, "string", false},
		{modulecontract.KindNumber, "number", true},
		{modulecontract.KindNumber, "string", false},
		{modulecontract.KindStringList, "list(string)", true},
		{modulecontract.KindStringList, "set(string)", true},
		{modulecontract.KindStringList, "list(any)", true},
		{modulecontract.KindStringList, "list(number)", false},
		{modulecontract.KindStringList, "tuple([string])", false},
		{modulecontract.KindObject, "map(string)", true},
		{modulecontract.KindObject, "object({ a = optional(string) })", true},
		{modulecontract.KindObject, "string", false},
	}
	for _, tc := range cases {
		ty, _, diags := typeexpr.TypeConstraintWithDefaults(expr(t, tc.typ))
		if diags.HasErrors() {
			t.Fatalf("%s: %v", tc.typ, diags)
		}
		if got := accepts(tc.kind, ty); got != tc.want {
			t.Errorf("accepts(%v, %s) = %v, want %v", tc.kind, tc.typ, got, tc.want)
		}
	}
}

// TestCredential: the last word of the name says credential; a public
// key, or a name that only mentions a key or a token, is none.
func TestCredential(t *testing.T) {
	cases := map[string]bool{
		"password":          true,
		"db_password":       true,
		"api_token":         true,
		"apikey":            true,
		"client-secret":     true,
		"secret_access_key": true,
		"private_keys":      true,
		"credentials":       true,
		"aws_creds":         true,
		"root_passwd":       true,
		"key_name":          false,
		"kms_key_id":        false,
		"token_ttl":         false,
		"ssh_public_key":    false,
		"environment":       false,
		"address":           false,
	}
	for name, want := range cases {
		if got := credential(name); got != want {
			t.Errorf("credential(%q) = %v, want %v", name, got, want)
		}
	}
}
