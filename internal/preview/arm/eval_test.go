package arm

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const testSub = "00000000-0000-0000-0000-0000000c4a7f"

// testTemplate declares what the expression tests read.
const testTemplate = `{
  "parameters": {
    "name": {"type": "string"},
    "count": {"type": "int", "defaultValue": 2},
    "password": {"type": "securestring"},
    "settings": {"type": "secureobject", "defaultValue": {"a": "CANARY-OBJ-9f1"}},
    "tags": {"type": "object", "defaultValue": {"team": "web", "Env": "prod"}},
    "zones": {"type": "array", "defaultValue": ["1", "2"]},
    "location": {"type": "string", "defaultValue": "[resourceGroup().location]"}
  },
  "variables": {
    "account": "[concat(parameters('name'), 'store')]",
    "full": "[format('{0}-{1}', variables('account'), parameters('count'))]",
    "loop": "[variables('loop')]"
  },
  "resources": [
    {"type": "Microsoft.Storage/storageAccounts", "apiVersion": "2023-01-01", "name": "[variables('account')]"}
  ]
}`

func testEvaluator(t *testing.T, r resolver) *evaluator {
	t.Helper()
	tmpl, err := parseTemplate([]byte(testTemplate))
	if err != nil {
		t.Fatal(err)
	}
	e := &evaluator{ctx: context.Background(), tmpl: tmpl, subscription: testSub,
		group: groupInfo{Name: "rg", ID: "/subscriptions/" + testSub + "/resourceGroups/rg", Location: "westeurope"}, resolve: r}
	if err := e.bind(map[string]any{"name": "web", "password": "CANARY-PW-5d21"}, "t.json", false); err != nil {
		t.Fatal(err)
	}
	if _, err := e.declare(false); err != nil {
		t.Fatal(err)
	}
	return e
}

func TestExpressions(t *testing.T) {
	storage := "/subscriptions/" + testSub + "/resourceGroups/rg/providers/Microsoft.Storage/storageAccounts/webstore"
	cases := []struct {
		expr string
		want any
	}{
		{"plain text", "plain text"},
		{"[[not an expression]", "[not an expression]"},
		{"[parameters('name')]", "web"},
		{"[parameters('NAME')]", "web"},
		{"[parameters('count')]", json.Number("2")},
		{"[parameters('location')]", "westeurope"},
		{"[variables('account')]", "webstore"},
		{"[variables('full')]", "webstore-2"},
		{"[concat('a', 1, true, 'b')]", "a1Trueb"},
		{"[concat(parameters('zones'), parameters('zones'))]", []any{"1", "2", "1", "2"}},
		{"[format('{0}/{1}{{x}}', 'a', 'b')]", "a/b{x}"},
		{"[resourceGroup().location]", "westeurope"},
		{"[resourceGroup().Location]", "westeurope"},
		{"[resourceGroup().id]", "/subscriptions/" + testSub + "/resourceGroups/rg"},
		{"[subscription().subscriptionId]", testSub},
		{"[resourceId('Microsoft.Storage/storageAccounts', variables('account'))]", storage},
		{"[resourceId('other', 'Microsoft.Storage/storageAccounts', 'x')]", "/subscriptions/" + testSub + "/resourceGroups/other/providers/Microsoft.Storage/storageAccounts/x"},
		{"[resourceId('11111111-1111-1111-1111-111111111111', 'other', 'Microsoft.Network/virtualNetworks/subnets', 'vnet', 'a')]", "/subscriptions/11111111-1111-1111-1111-111111111111/resourceGroups/other/providers/Microsoft.Network/virtualNetworks/vnet/subnets/a"},
		{"[parameters('tags').team]", "web"},
		{"[parameters('tags')['env']]", "prod"},
		{"[parameters('zones')[1]]", "2"},
		{"[toUpper(parameters('name'))]", "WEB"},
		{"[if(equals(parameters('count'), 2), 'two', reference('nowhere').x)]", "two"},
		{"[and(true(), not(false()))]", true},
		{"[string(parameters('tags'))]", `{"Env":"prod","team":"web"}`},
		{"[int('42')]", json.Number("42")},
		{"[equals(1, int('1'))]", true},
		// A value read from reference() or listKeys() is known only after
		// apply; whatever is made of it too. listKeys' is sensitive.
		{"[reference(resourceId('Microsoft.Storage/storageAccounts', 'webstore')).primaryEndpoints.blob]", unknownValue{}},
		{"[reference('webstore')]", unknownValue{}},
		{"[concat('x', reference('webstore').a)]", unknownValue{}},
		{"[listKeys(resourceId('Microsoft.Storage/storageAccounts', 'webstore'), '2023-01-01').keys[0].value]", unknownValue{Sensitive: true}},
		{"[concat('k=', listKeys('webstore', '2023-01-01').keys[0].value)]", unknownValue{Sensitive: true}},
		// A secure parameter's value, and what is made of it, is secure.
		{"[parameters('password')]", secretValue{"CANARY-PW-5d21"}},
		{"[concat('pw=', parameters('password'))]", secretValue{"pw=CANARY-PW-5d21"}},
		{"[parameters('settings').a]", secretValue{"CANARY-OBJ-9f1"}},
	}
	for _, c := range cases {
		t.Run(c.expr, func(t *testing.T) {
			got, err := testEvaluator(t, planning{}).tree(c.expr)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestExpressionErrors(t *testing.T) {
	cases := []struct {
		expr, want string
		nothing    bool
	}{
		{"[uniqueString(resourceGroup().id)]", "uniqueString() is not a template function captf evaluates", false},
		{"[parameters('nope')]", "the template declares no parameter nope", false},
		{"[variables('loop')]", "the variable reads itself", false},
		{"[concat('a']", "not closed", false},
		{"[format('{0:N2}', 1)]", "format specifiers are not evaluated", false},
		{"[format('{1}', 'a')]", "{1} has no argument", false},
		{"[parameters('tags').missing]", `the object has no property "missing"`, true},
		{"[reference('nowhere')]", "no resource of the template has that name", false},
		{"[reference('/subscriptions/x/resourceGroups/y/providers/A.B/c/d')]", "needs an apiVersion", false},
		{"[listKeys('webstore')]", "listKeys takes a resource id and an apiVersion", false},
		{"[resourceId('Microsoft.Network/virtualNetworks/subnets', 'vnet')]", "takes 2 names, not 1", false},
		// A failing function of a secure value never quotes it.
		{"[format(concat('{', parameters('password'), '}'))]", "format() of a secure value fails (the reason is withheld", false},
	}
	for _, c := range cases {
		t.Run(c.expr, func(t *testing.T) {
			_, err := testEvaluator(t, planning{}).tree(c.expr)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want it to say %q", err, c.want)
			}
			if errors.Is(err, errNothing) != c.nothing {
				t.Errorf("errors.Is(err, errNothing) = %v, want %v", !c.nothing, c.nothing)
			}
			if strings.Contains(err.Error(), "CANARY") {
				t.Errorf("the error shows a secure value: %v", err)
			}
		})
	}
}

// TestParameters: values are checked against the template's types and
// allowedValues, missing ones against its defaults; errors name the
// parameter, never the value.
func TestParameters(t *testing.T) {
	tmpl := `{"parameters": {
	  "sku": {"type": "string", "allowedValues": ["Standard_LRS", "Premium_LRS"]},
	  "n": {"type": "int", "defaultValue": 1},
	  "secret": {"type": "securestring"}}}`
	cases := []struct {
		given map[string]any
		want  string
	}{
		{map[string]any{"sku": "Standard_LRS", "secret": "CANARY-1234"}, ""},
		{map[string]any{"sku": "Basic_CANARY", "secret": "x"}, "input parameters.sku: the value is not one of the template's allowedValues"},
		{map[string]any{"sku": "Standard_LRS", "secret": "x", "n": "CANARY-3"}, "input parameters.n: the template's type is int, the value is a string"},
		{map[string]any{"sku": "Standard_LRS"}, "input parameters.secret: missing, and template t.json gives parameter secret no defaultValue"},
		{map[string]any{"sku": "Standard_LRS", "secret": "x", "other": "CANARY"}, "input parameters.other: template t.json declares no parameter other"},
		{map[string]any{"sku": "Standard_LRS", "secret": json.Number("5")}, "input parameters.secret: the template's type is securestring, the value is a number"},
	}
	for _, c := range cases {
		parsed, err := parseTemplate([]byte(tmpl))
		if err != nil {
			t.Fatal(err)
		}
		e := &evaluator{tmpl: parsed}
		err = e.bind(c.given, "t.json", false)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%v: %v", c.given, err)
		case c.want != "" && (err == nil || err.Error() != c.want):
			t.Errorf("%v: error %v, want %q", c.given, err, c.want)
		case err != nil && strings.Contains(err.Error(), "CANARY"):
			t.Errorf("the error shows a value: %v", err)
		}
	}
}

func TestTemplateRefusals(t *testing.T) {
	cases := []struct{ tmpl, want string }{
		{`{"resources": [{"type": "A.B/c", "apiVersion": "1", "name": "x", "copy": {"name": "l", "count": 2}}]}`, "resources[0].copy: copy loops are not expanded"},
		{`{"resources": [{"type": "A.B/c", "apiVersion": "1", "name": "x", "resources": []}]}`, "resources[0].resources: nested child resources"},
		{`{"resources": [{"type": "A.B/c", "name": "x"}]}`, "resources[0].apiVersion: missing"},
		{`{"languageVersion": "2.0", "resources": {}}`, "languageVersion"},
		{`{"parameters": {"p": {"type": "strng"}}}`, `parameters.p.type: "strng" is not a parameter type`},
		{`{"resources": [], "bogus": 1}`, "bogus: not a property of an ARM template"},
		{`[1]`, "not an ARM JSON template"},
	}
	for _, c := range cases {
		_, err := parseTemplate([]byte(c.tmpl))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.tmpl, err, c.want)
		}
	}
}
