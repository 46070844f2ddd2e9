package arm

// These tests run the capability against internal/preview/arm/armtest, a
// test server in the shapes of ARM's REST API reference: no ARM emulator
// runs here, so it is not Azure (see its package comment for what it
// answers). It records every request, which is how the tests say that a
// plan PUT nothing and a refused apply changed nothing.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/captf/captf/internal/preview"
	"github.com/captf/captf/internal/preview/arm/armtest"
	"github.com/captf/captf/internal/preview/previewtest"
	"github.com/captf/captf/pkg/changeset"
)

// canary is the secure parameter's value: it must appear in no plan,
// error, output, document or note.
const canary = "CANARY-ARM-SECURE-7c1e9"

const mainTemplate = `{
  "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
  "contentVersion": "1.0.0.0",
  "parameters": {
    "prefix": {"type": "string"},
    "adminPassword": {"type": "securestring"},
    "location": {"type": "string", "defaultValue": "[resourceGroup().location]"}
  },
  "variables": {
    "account": "[concat(parameters('prefix'), 'store')]",
    "sql": "[format('{0}-sql', parameters('prefix'))]"
  },
  "resources": [
    {
      "type": "Microsoft.Storage/storageAccounts",
      "apiVersion": "2023-01-01",
      "name": "[variables('account')]",
      "location": "[parameters('location')]",
      "kind": "StorageV2",
      "sku": {"name": "Standard_LRS"},
      "tags": {"team": "web"},
      "properties": {"minimumTlsVersion": "TLS1_2"}
    },
    {
      "type": "Microsoft.Sql/servers",
      "apiVersion": "2021-11-01",
      "name": "[variables('sql')]",
      "location": "[parameters('location')]",
      "properties": {
        "administratorLogin": "captf",
        "administratorLoginPassword": "[parameters('adminPassword')]",
        "version": "12.0"
      }
    }
  ],
  "outputs": {
    "accountId": {"type": "string", "value": "[resourceId('Microsoft.Storage/storageAccounts', variables('account'))]"},
    "blob": {"type": "string", "value": "[reference(variables('account')).primaryEndpoints.blob]"},
    "sqlHost": {"type": "string", "value": "[reference(resourceId('Microsoft.Sql/servers', variables('sql')), '2021-11-01').fullyQualifiedDomainName]"},
    "password": {"type": "securestring", "value": "[parameters('adminPassword')]"},
    "withPassword": {"type": "string", "value": "[concat('pw:', parameters('adminPassword'))]"}
  }
}`

const (
	storageAddress = "Microsoft.Storage/storageAccounts/webstore"
	sqlAddress     = "Microsoft.Sql/servers/web-sql"
	groupAddress   = "Microsoft.Resources/resourceGroups/rg-web"
)

func resourceID(address string) string {
	return "/subscriptions/" + armtest.Subscription + "/resourceGroups/rg-web/providers/" + address
}

// step is one arm-deploy step over main.json, which the test rewrites.
type step struct {
	t      *testing.T
	srv    *armtest.Server
	root   string
	inputs map[string]any
	key    []byte
	env    string
	cap    *Capability
	// texts are everything the capability returned, for the canary check.
	texts []string
}

func newStep(t *testing.T) *step {
	t.Helper()
	s := &step{
		t: t, srv: armtest.New(t), root: t.TempDir(), key: previewtest.Key(), env: "test",
		cap: &Capability{Poll: time.Millisecond},
	}
	s.inputs = map[string]any{
		"template": "main.json", "resourceGroup": "rg-web", "location": "West Europe",
		"endpoint": s.srv.URL, "subscriptionId": armtest.Subscription,
		"parameters": map[string]any{"prefix": "web", "adminPassword": canary},
	}
	s.template(mainTemplate)
	t.Cleanup(func() { s.checkCanary() })
	return s
}

func (s *step) template(body string) {
	s.t.Helper()
	if err := os.WriteFile(filepath.Join(s.root, "main.json"), []byte(body), 0o600); err != nil {
		s.t.Fatal(err)
	}
}

// edit replaces old with new in main.json.
func (s *step) edit(old, new string) {
	s.t.Helper()
	b, err := os.ReadFile(filepath.Join(s.root, "main.json"))
	if err != nil {
		s.t.Fatal(err)
	}
	if !strings.Contains(string(b), old) {
		s.t.Fatalf("main.json does not hold %q", old)
	}
	s.template(strings.Replace(string(b), old, new, 1))
}

func (s *step) param(name string, v any) {
	s.inputs["parameters"].(map[string]any)[name] = v
}

func (s *step) req() preview.Request {
	in := map[string]any{}
	for k, v := range s.inputs {
		in[k] = v
	}
	return preview.Request{Component: "web", Environment: s.env, Root: s.root, WorkDir: s.t.TempDir(), Inputs: in, Key: s.key}
}

func (s *step) keep(v any) {
	b, _ := json.Marshal(v)
	s.texts = append(s.texts, string(b))
	if p, ok := v.(*preview.Plan); ok && p != nil {
		doc := &changeset.Document{Version: changeset.Version, Members: []changeset.Member{p.Member}, Entries: p.Entries}
		s.texts = append(s.texts, changeset.Note(doc, changeset.NoteOptions{}))
	}
}

func (s *step) keepErr(err error) {
	if err != nil {
		s.texts = append(s.texts, err.Error())
	}
}

func (s *step) plan() *preview.Plan {
	s.t.Helper()
	p, err := s.cap.Plan(context.Background(), s.req())
	s.keepErr(err)
	if err != nil {
		s.t.Fatal(err)
	}
	s.keep(p)
	return p
}

func (s *step) apply(approved *preview.Plan) (preview.Outputs, error) {
	s.t.Helper()
	out, err := s.cap.Apply(context.Background(), s.req(), approved)
	s.keepErr(err)
	s.keep(out)
	return out, err
}

// deploy plans and applies.
func (s *step) deploy() preview.Outputs {
	s.t.Helper()
	out, err := s.apply(s.plan())
	if err != nil {
		s.t.Fatal(err)
	}
	return out
}

// checkCanary looks for the secure value in everything the capability
// returned; it must be there only in what was PUT.
func (s *step) checkCanary() {
	for _, text := range s.texts {
		if strings.Contains(text, canary) {
			s.t.Errorf("the secure value shows in %s", text)
		}
	}
}

// entries renders a plan's entries as "action address" and, indented,
// "path: before → after".
func entries(t *testing.T, p *preview.Plan) []string {
	t.Helper()
	var out []string
	for _, e := range p.Entries {
		out = append(out, e.Action+" "+e.Address)
		for _, a := range e.Attributes {
			side := func(raw json.RawMessage) string {
				if raw == nil {
					return "(none)"
				}
				return string(raw)
			}
			switch {
			case a.Sensitive:
				out = append(out, "  "+a.Name+": (sensitive)")
			case a.Unknown:
				out = append(out, "  "+a.Name+": "+side(a.Before)+" → (known after apply)")
			default:
				out = append(out, "  "+a.Name+": "+side(a.Before)+" → "+side(a.After))
			}
		}
	}
	return out
}

func outputs(o preview.Outputs) map[string]string {
	out := map[string]string{}
	for k, v := range o {
		out[k] = string(v)
	}
	return out
}

func TestLifecycle(t *testing.T) {
	s := newStep(t)

	// 1. Nothing there: the group and every resource are created, each
	// with every property it declares; the secure one has no value.
	p := s.plan()
	if diff := cmp.Diff([]string{
		"create " + groupAddress,
		`  location: (none) → "westeurope"`,
		"create " + storageAddress,
		`  kind: (none) → "StorageV2"`,
		`  location: (none) → "westeurope"`,
		`  properties.minimumTlsVersion: (none) → "TLS1_2"`,
		`  sku.name: (none) → "Standard_LRS"`,
		`  tags.team: (none) → "web"`,
		"create " + sqlAddress,
		`  location: (none) → "westeurope"`,
		`  properties.administratorLogin: (none) → "captf"`,
		"  properties.administratorLoginPassword: (sensitive)",
		`  properties.version: (none) → "12.0"`,
	}, entries(t, p)); diff != "" {
		t.Errorf("first plan (-want +got):\n%s", diff)
	}
	if p.Member.Name != "rg-web" || p.Member.Capability != Kind || !strings.HasPrefix(p.Member.PlanDigest, DigestPrefix) || len(p.Member.Holes) != 0 {
		t.Errorf("member %+v", p.Member)
	}
	if diff := cmp.Diff([]string{"accountId", "blob", "sqlHost", "withPassword"}, p.DeclaredOutputs); diff != "" {
		t.Errorf("declared outputs (-want +got):\n%s", diff)
	}
	// Only the output that reads no resource is known before apply.
	if diff := cmp.Diff(map[string]string{"accountId": `"` + resourceID(storageAddress) + `"`}, outputs(p.PlannedOutputs)); diff != "" {
		t.Errorf("planned outputs (-want +got):\n%s", diff)
	}
	if w := s.srv.Writes(); len(w) != 0 {
		t.Fatalf("the plan wrote: %+v", w)
	}

	// 2. The apply creates the group and PUTs each resource with captf's
	// tags; the outputs are read back (the secure ones left out).
	out, err := s.apply(p)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{
		"accountId": `"` + resourceID(storageAddress) + `"`,
		"blob":      `"https://webstore.blob.core.windows.net/"`,
		"sqlHost":   `"web-sql.database.windows.net"`,
	}, outputs(out)); diff != "" {
		t.Errorf("outputs (-want +got):\n%s", diff)
	}
	var puts []string
	for _, r := range s.srv.Writes() {
		puts = append(puts, r.Method+" "+r.Path+" "+r.Query.Get("api-version"))
	}
	if diff := cmp.Diff([]string{
		"PUT /subscriptions/" + armtest.Subscription + "/resourceGroups/rg-web 2021-04-01",
		"PUT " + resourceID(storageAddress) + " 2023-01-01",
		"PUT " + resourceID(sqlAddress) + " 2021-11-01",
	}, puts); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}
	storage := s.srv.Resource(resourceID(storageAddress))
	if tags := storage["tags"].(map[string]any); tags[OwnerTag] != "web" || tags["team"] != "web" || tags[SecureTag] != nil {
		t.Errorf("storage tags %v", tags)
	}
	sql := s.srv.Resource(resourceID(sqlAddress))
	if tag, _ := sql["tags"].(map[string]any)[SecureTag].(string); !strings.HasPrefix(tag, preview.SealedPrefix) || strings.Contains(tag, canary) {
		t.Errorf("sql %s tag %q", SecureTag, tag)
	}
	if !strings.Contains(string(s.srv.Writes()[2].Body), canary) {
		t.Error("the secure value was not PUT")
	}

	// 3. Planned again: every resource is a no-op although ARM added
	// etag, systemData, provisioningState, defaults (sku.tier,
	// accessTier, primaryEndpoints…), normalised the location and never
	// returns the password: the noise rules and the secure tag.
	p = s.plan()
	if diff := cmp.Diff([]string{"no-op " + storageAddress, "no-op " + sqlAddress}, entries(t, p)); diff != "" {
		t.Errorf("plan after apply (-want +got):\n%s", diff)
	}
	// Every resource an output reads is planned no-op: all are known.
	if diff := cmp.Diff([]string{"accountId", "blob", "sqlHost"}, sortedKeys(p.PlannedOutputs)); diff != "" {
		t.Errorf("planned outputs (-want +got):\n%s", diff)
	}

	// 4. A changed property and a drifted one: an update listing each
	// changed path with its value before and after.
	s.edit(`"minimumTlsVersion": "TLS1_2"`, `"minimumTlsVersion": "TLS1_3"`)
	s.srv.Edit(resourceID(storageAddress), func(o map[string]any) { o["sku"].(map[string]any)["name"] = "Premium_LRS" })
	p = s.plan()
	if diff := cmp.Diff([]string{
		"update " + storageAddress,
		`  properties.minimumTlsVersion: "TLS1_2" → "TLS1_3"`,
		`  sku.name: "Premium_LRS" → "Standard_LRS"`,
		"no-op " + sqlAddress,
	}, entries(t, p)); diff != "" {
		t.Errorf("update (-want +got):\n%s", diff)
	}
	// The storage account is updated: its output is known after apply.
	if diff := cmp.Diff([]string{"accountId", "sqlHost"}, sortedKeys(p.PlannedOutputs)); diff != "" {
		t.Errorf("planned outputs (-want +got):\n%s", diff)
	}
	before := len(s.srv.Writes())
	if _, err := s.apply(p); err != nil {
		t.Fatal(err)
	}
	if w := s.srv.Writes()[before:]; len(w) != 1 || w[0].Path != resourceID(storageAddress) {
		t.Errorf("the update wrote %+v, want one PUT of the storage account", w)
	}
	if p := s.plan(); len(entries(t, p)) != 2 || p.Entries[0].Action != changeset.ActionNoOp {
		t.Errorf("after the update: %v", entries(t, p))
	}

	// 5. A resource the template drops: deleted only with prune, and only
	// resources carrying this component's ownership tag.
	s.srv.Seed(resourceID("Microsoft.Storage/storageAccounts/notours"), map[string]any{"location": "westeurope", "tags": map[string]any{"team": "web"}})
	s.srv.Seed(resourceID("Microsoft.Storage/storageAccounts/othercomp"), map[string]any{"location": "westeurope", "tags": map[string]any{OwnerTag: "api"}})
	s.edit(`"name": "[variables('sql')]",`, `"name": "[variables('sql')]", "condition": false,`)
	if got := entries(t, s.plan()); slices.ContainsFunc(got, func(e string) bool { return strings.HasPrefix(e, "delete") }) {
		t.Errorf("deletes without prune: %v", got)
	}
	s.inputs["prune"] = true
	p = s.plan()
	if diff := cmp.Diff([]string{"no-op " + storageAddress, "delete " + sqlAddress}, entries(t, p)); diff != "" {
		t.Errorf("prune (-want +got):\n%s", diff)
	}
	if _, err := s.apply(p); err != nil {
		t.Fatal(err)
	}
	if s.srv.Resource(resourceID(sqlAddress)) != nil {
		t.Error("the pruned resource is still there")
	}
	for _, a := range []string{"Microsoft.Storage/storageAccounts/notours", "Microsoft.Storage/storageAccounts/othercomp", storageAddress} {
		if s.srv.Resource(resourceID(a)) == nil {
			t.Errorf("%s was deleted", a)
		}
	}
	if got := entries(t, s.plan()); len(got) != 1 {
		t.Errorf("after the prune: %v", got)
	}
}

// TestSecureParameter: a secure value is bound by the keyed digest and
// compared through the tag captf stamps, since ARM never returns it.
func TestSecureParameter(t *testing.T) {
	s := newStep(t)
	s.deploy()
	reviewed := s.plan()
	if got := entries(t, reviewed); slices.ContainsFunc(got, func(e string) bool { return !strings.HasPrefix(e, "no-op") }) {
		t.Fatalf("after apply: %v", got)
	}

	// Another password: an update of the property, with no value either
	// side, and the digest moves.
	s.param("adminPassword", canary+"-v2")
	p := s.plan()
	if diff := cmp.Diff([]string{"no-op " + storageAddress, "update " + sqlAddress, "  properties.administratorLoginPassword: (sensitive)"}, entries(t, p)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if p.Member.PlanDigest == reviewed.Member.PlanDigest {
		t.Error("a new secure value does not move the digest")
	}
	if _, err := s.apply(p); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(s.srv.Writes()[len(s.srv.Writes())-1].Body), canary+"-v2") {
		t.Error("the new secure value was not PUT")
	}
	if got := entries(t, s.plan()); got[1] != "no-op "+sqlAddress {
		t.Errorf("after the update: %v", got)
	}

	// A child resource gets no tags: its secure value is compared with
	// what ARM returns, and a write-only one is always PUT again.
	s.edit(`  "outputs": {`, `  "outputs": {"unused": {"type": "string", "value": "x"},`)
	s.edit(`  ],
  "outputs"`, `    ,{"type": "Microsoft.KeyVault/vaults/secrets", "apiVersion": "2023-07-01", "name": "vault/db", "properties": {"value": "[parameters('adminPassword')]"}}
  ],
  "outputs"`)
	s.srv.Seed(resourceID("Microsoft.KeyVault/vaults/vault"), map[string]any{"location": "westeurope"})
	s.deploy()
	if got := entries(t, s.plan()); !slices.Contains(got, "update Microsoft.KeyVault/vaults/vault/secrets/db") || !slices.Contains(got, "  properties.value: (sensitive)") {
		t.Errorf("a write-only secure value of a child resource: %v", got)
	}
	if tags := s.srv.Resource(resourceID("Microsoft.KeyVault/vaults/vault/secrets/db"))["tags"]; tags != nil {
		t.Errorf("a child resource got tags %v", tags)
	}
}

// TestReferenceAndListKeys: values read from reference() and listKeys()
// are known after apply; the plan never calls listKeys, the apply does,
// and the keys show nowhere.
func TestReferenceAndListKeys(t *testing.T) {
	s := newStep(t)
	s.edit(`  ],
  "outputs"`, `    ,{
      "type": "Microsoft.Web/sites", "apiVersion": "2023-01-01", "name": "web-app",
      "location": "[parameters('location')]",
      "dependsOn": ["[resourceId('Microsoft.Storage/storageAccounts', variables('account'))]"],
      "properties": {"siteConfig": {"appSettings": [
        {"name": "BLOB", "value": "[reference(variables('account')).primaryEndpoints.blob]"},
        {"name": "KEY", "value": "[listKeys(resourceId('Microsoft.Storage/storageAccounts', variables('account')), '2023-01-01').keys[0].value]"}
      ]}}
    }
  ],
  "outputs"`)
	// Template order would PUT the site before the storage account it
	// reads; dependsOn puts it after.
	s.edit(`  "resources": [`, `  "resources": [
    {"type": "Microsoft.Web/serverfarms", "apiVersion": "2023-01-01", "name": "plan", "location": "westeurope", "dependsOn": ["web-app"]},`)
	p := s.plan()
	got := entries(t, p)
	for _, want := range []string{
		"create Microsoft.Web/sites/web-app",
		"  properties.siteConfig.appSettings.0.value: (none) → (known after apply)",
		"  properties.siteConfig.appSettings.1.value: (sensitive)",
	} {
		if !slices.Contains(got, want) {
			t.Errorf("the plan lacks %q:\n%s", want, strings.Join(got, "\n"))
		}
	}
	for _, r := range s.srv.Requests() {
		if r.Method != http.MethodGet {
			t.Errorf("the plan called %s %s", r.Method, r.Path)
		}
	}
	s.deploy()
	var order []string
	for _, r := range s.srv.Requests() {
		if r.Method != http.MethodGet {
			order = append(order, r.Method+" "+r.Path[strings.LastIndex(r.Path, "/")+1:])
		}
	}
	if diff := cmp.Diff([]string{"PUT rg-web", "PUT webstore", "PUT web-sql", "POST listKeys", "PUT web-app", "PUT plan"}, order); diff != "" {
		t.Errorf("apply order (-want +got):\n%s", diff)
	}
	site := s.srv.Resource(resourceID("Microsoft.Web/sites/web-app"))
	settings, _ := json.Marshal(site["properties"])
	key := "KEY1-webstore-c2VjcmV0a2V5MQ=="
	if !strings.Contains(string(settings), key) || !strings.Contains(string(settings), "https://webstore.blob.core.windows.net/") {
		t.Errorf("the site was PUT without the resolved values: %s", settings)
	}
	// Planned again, the site still reads values known only after apply:
	// the one from reference() shows its value before, the key none.
	got = entries(t, s.plan())
	for _, want := range []string{
		"update Microsoft.Web/sites/web-app",
		`  properties.siteConfig.appSettings.0.value: "https://webstore.blob.core.windows.net/" → (known after apply)`,
		"  properties.siteConfig.appSettings.1.value: (sensitive)",
	} {
		if !slices.Contains(got, want) {
			t.Errorf("the plan lacks %q:\n%s", want, strings.Join(got, "\n"))
		}
	}
	for _, text := range s.texts {
		if strings.Contains(text, key) {
			t.Errorf("a key shows in %s", text)
		}
	}
}

// TestHoles: a read that fails with anything but a 404 leaves a hole
// naming the reason, and the apply refuses such a plan with nothing
// written; a step waiting on an upstream reads nothing.
func TestHoles(t *testing.T) {
	cases := []struct {
		name  string
		setup func(s *step)
		want  []changeset.Hole
		// entries left beside the holes
		entries int
	}{
		{"a 500 on a resource", func(s *step) {
			s.srv.Fail(armtest.Fault{Method: http.MethodGet, PathSuffix: "/webstore", Status: 500, Code: "InternalServerError",
				Message: "Encountered internal server error. Diagnostic information: tracking id '4f2a'."})
		}, []changeset.Hole{{Address: storageAddress, Reason: "read " + storageAddress + " at api-version 2023-01-01: HTTP 500 InternalServerError: Encountered internal server error. Diagnostic information: tracking id '4f2a'."}}, 1},
		{"a 403 on the group", func(s *step) {
			s.srv.Fail(armtest.Fault{Method: http.MethodGet, PathSuffix: "/resourceGroups/rg-web", Status: 403, Code: "AuthorizationFailed",
				Message: "The client 'ci' does not have authorization to perform action 'Microsoft.Resources/subscriptions/resourceGroups/read' over scope '/subscriptions/" + armtest.Subscription + "/resourceGroups/rg-web'."})
		}, []changeset.Hole{{Reason: "read resource group rg-web: HTTP 403 AuthorizationFailed: The client 'ci' does not have authorization to perform action 'Microsoft.Resources/subscriptions/resourceGroups/read' over scope '/subscriptions/" + armtest.Subscription + "/resourceGroups/rg-web'."}}, 0},
		{"an api-version the type is not served at", func(s *step) {
			s.srv.APIVersions("Microsoft.Sql/servers", "2023-08-01")
		}, []changeset.Hole{{Address: sqlAddress, Reason: "read " + sqlAddress + " at api-version 2021-11-01: HTTP 400 NoRegisteredProviderFound: No registered resource provider found for location 'westeurope' and API version '2021-11-01' for type 'Microsoft.Sql/servers'. The supported api-versions are '2023-08-01'."}}, 1},
		{"a 404 that is not about the resource", func(s *step) {
			s.srv.Fail(armtest.Fault{Method: http.MethodGet, PathSuffix: "/web-sql", Status: 404, Code: "InvalidResourceType", Message: "The resource type 'servers' could not be found in the namespace 'Microsoft.Sql' for api version '2021-11-01'."})
		}, []changeset.Hole{{Address: sqlAddress, Reason: "read " + sqlAddress + " at api-version 2021-11-01: HTTP 404 InvalidResourceType: The resource type 'servers' could not be found in the namespace 'Microsoft.Sql' for api version '2021-11-01'."}}, 1},
		{"a failing list of the group with prune", func(s *step) {
			s.inputs["prune"] = true
			s.srv.Fail(armtest.Fault{Method: http.MethodGet, PathSuffix: "/resources", Status: 503, Code: "ServerTimeout", Message: "The request timed out."})
		}, []changeset.Hole{{Reason: "prune: list the resources of group rg-web: HTTP 503 ServerTimeout: The request timed out.; no delete is planned"}}, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newStep(t)
			s.srv.CreateGroup(armtest.Subscription, "rg-web", "westeurope")
			c.setup(s)
			p := s.plan()
			if diff := cmp.Diff(c.want, p.Member.Holes); diff != "" {
				t.Errorf("holes (-want +got):\n%s", diff)
			}
			if len(p.Entries) != c.entries {
				t.Errorf("entries %v, want %d", entries(t, p), c.entries)
			}
			_, err := s.apply(p)
			if err == nil || !strings.Contains(err.Error(), "refusing to apply") || !strings.Contains(err.Error(), "nothing was applied") || errors.Is(err, preview.ErrMoved) {
				t.Errorf("apply: %v", err)
			}
			if w := s.srv.Writes(); len(w) != 0 {
				t.Errorf("the apply of a plan with holes wrote %+v", w)
			}
		})
	}

	t.Run("a step waiting on an upstream", func(t *testing.T) {
		s := newStep(t)
		req := s.req()
		req.Missing = []string{"network", "db", "network"}
		p, err := s.cap.Plan(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		s.keep(p)
		if diff := cmp.Diff([]changeset.Hole{{Reason: "inputs from db; re-checked on apply"}, {Reason: "inputs from network; re-checked on apply"}}, p.Member.Holes); diff != "" {
			t.Errorf("holes (-want +got):\n%s", diff)
		}
		if len(p.Entries) != 0 || len(s.srv.Requests()) != 0 {
			t.Errorf("entries %v, requests %+v: want none", p.Entries, s.srv.Requests())
		}
		if diff := cmp.Diff([]string{"accountId", "blob", "sqlHost", "withPassword"}, p.DeclaredOutputs); diff != "" {
			t.Errorf("declared outputs (-want +got):\n%s", diff)
		}
		if _, err := s.cap.Apply(context.Background(), req, p); err == nil || !strings.Contains(err.Error(), "nothing was applied") {
			t.Errorf("apply with inputs missing: %v", err)
		}
		req.Missing = []string{"db"}
		other, err := s.cap.Plan(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if other.Member.PlanDigest == p.Member.PlanDigest {
			t.Error("the digest does not bind which upstreams are missing")
		}
	})
}

// TestDigest: the digest binds the environment, the template's bytes,
// where the step deploys, prune, the parameters (a secure one under the
// key) and every entry; the same step planned twice digests alike.
func TestDigest(t *testing.T) {
	s := newStep(t)
	base := s.plan().Member.PlanDigest
	if again := s.plan().Member.PlanDigest; again != base {
		t.Fatalf("the same step digests to %s, then %s", base, again)
	}
	cases := []struct {
		name   string
		change func(s *step)
		// sameEntries: the change shows in no entry, only the digest moves
		sameEntries bool
	}{
		{"the template's bytes", func(s *step) { s.edit(`"contentVersion": "1.0.0.0"`, `"contentVersion": "1.0.0.1"`) }, true},
		{"a parameter", func(s *step) { s.param("prefix", "api") }, false},
		{"a parameter's value with the same entries", func(s *step) {
			s.edit(`"prefix": {"type": "string"}`, `"prefix": {"type": "string"}, "unused": {"type": "string", "defaultValue": ""}`)
			s.param("unused", "a")
		}, true},
		{"the location", func(s *step) { s.inputs["location"] = "northeurope" }, false},
		{"the secure parameter", func(s *step) { s.param("adminPassword", canary+"-other") }, true},
		{"the preview key", func(s *step) { s.key = previewtest.OtherKey() }, true},
		{"prune", func(s *step) { s.inputs["prune"] = true }, true},
		{"the environment", func(s *step) { s.env = "prod" }, true},
		{"the group", func(s *step) { s.inputs["resourceGroup"] = "rg-other" }, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newStep(t)
			before := s.plan()
			c.change(s)
			after := s.plan()
			if after.Member.PlanDigest == before.Member.PlanDigest {
				t.Errorf("the digest did not move")
			}
			same := cmp.Diff(entries(t, before), entries(t, after)) == ""
			if c.name != "the group" && same != c.sameEntries {
				t.Errorf("entries the same: %v, want %v", same, c.sameEntries)
			}
		})
	}
	if w := s.srv.Writes(); len(w) != 0 {
		t.Errorf("plans wrote %+v", w)
	}
}

// TestApplyRefusesMovedPlan: Apply plans again and refuses before any PUT
// when the digest differs, wrapping preview.ErrMoved.
func TestApplyRefusesMovedPlan(t *testing.T) {
	cases := []struct {
		name string
		move func(s *step)
	}{
		{"the template changed", func(s *step) { s.edit(`"minimumTlsVersion": "TLS1_2"`, `"minimumTlsVersion": "TLS1_3"`) }},
		{"a resource drifted", func(s *step) {
			s.srv.Edit(resourceID(storageAddress), func(o map[string]any) { o["kind"] = "BlobStorage" })
		}},
		{"the secure parameter changed", func(s *step) { s.param("adminPassword", canary+"-moved") }},
		{"a resource appeared", func(s *step) {
			s.srv.Seed(resourceID("Microsoft.Storage/storageAccounts/extra"), map[string]any{"location": "westeurope", "tags": map[string]any{OwnerTag: "web"}})
			s.inputs["prune"] = true
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newStep(t)
			s.deploy()
			s.edit(`"version": "12.0"`, `"version": "12.1"`)
			if c.name == "a resource appeared" {
				s.inputs["prune"] = true
			}
			reviewed := s.plan()
			if c.name == "a resource appeared" {
				delete(s.inputs, "prune")
			}
			c.move(s)
			writes := len(s.srv.Writes())
			_, err := s.apply(reviewed)
			if !errors.Is(err, preview.ErrMoved) || !strings.Contains(err.Error(), "refusing to apply") || !strings.Contains(err.Error(), reviewed.Member.PlanDigest) {
				t.Fatalf("apply: %v", err)
			}
			if w := s.srv.Writes()[writes:]; len(w) != 0 {
				t.Errorf("a refused apply wrote %+v", w)
			}
		})
	}
}

// TestLongRunning: a PUT answered 201 with a state that is not terminal is
// followed until Succeeded; Failed fails the apply; a 202 delete is
// followed until the resource is gone.
func TestLongRunning(t *testing.T) {
	s := newStep(t)
	s.srv.Provision("Microsoft.Sql/servers", "Creating", "Creating", "Succeeded")
	s.deploy()
	var after []string
	seenPut := false
	for _, r := range s.srv.Requests() {
		if r.Method == http.MethodPut && r.Path == resourceID(sqlAddress) {
			seenPut = true
			if r.Status != http.StatusCreated {
				t.Errorf("the PUT answered %d", r.Status)
			}
			continue
		}
		if seenPut && r.Path == resourceID(sqlAddress) {
			after = append(after, r.Method)
		}
	}
	if len(after) < 3 {
		t.Errorf("after the PUT the apply read the server %v, want at least the two Creating and a Succeeded", after)
	}

	s.srv.Provision("Microsoft.Sql/servers", "Updating", "Failed")
	s.edit(`"version": "12.0"`, `"version": "12.1"`)
	if _, err := s.apply(s.plan()); err == nil || !strings.Contains(err.Error(), "PUT "+sqlAddress+": provisioning ended Failed") {
		t.Errorf("apply: %v", err)
	}

	// Deletes answered 202, and a list of the group in pages of one.
	s.srv.PageSize = 1
	s.srv.DeleteAsync(2)
	s.srv.Seed(resourceID("Microsoft.Storage/storageAccounts/old1"), map[string]any{"location": "westeurope", "tags": map[string]any{OwnerTag: "web"}})
	s.srv.Seed(resourceID("Microsoft.Network/publicIPAddresses/old2"), map[string]any{"location": "westeurope", "tags": map[string]any{OwnerTag: "web"}})
	s.srv.APIVersions("Microsoft.Network/publicIPAddresses", "2023-09-01", "2024-01-01-preview")
	s.inputs["prune"] = true
	s.edit(`"version": "12.1"`, `"version": "12.0"`)
	s.srv.Provision("Microsoft.Sql/servers")
	p := s.plan()
	got := entries(t, p)
	for _, want := range []string{"delete Microsoft.Network/publicIPAddresses/old2", "delete Microsoft.Storage/storageAccounts/old1"} {
		if !slices.Contains(got, want) {
			t.Errorf("the plan lacks %q: %v", want, got)
		}
	}
	if _, err := s.apply(p); err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"Microsoft.Storage/storageAccounts/old1", "Microsoft.Network/publicIPAddresses/old2"} {
		if s.srv.Resource(resourceID(a)) != nil {
			t.Errorf("%s is still there", a)
		}
	}
	// The type the template does not declare is deleted at the latest
	// api-version the provider serves that is not a preview.
	for _, r := range s.srv.Requests() {
		if r.Method == http.MethodDelete && strings.HasSuffix(r.Path, "/old2") && r.Query.Get("api-version") != "2023-09-01" {
			t.Errorf("deleted at api-version %s", r.Query.Get("api-version"))
		}
	}
}

// TestSensitiveNeverLeaks: the secure value reaches no plan, error, hole,
// output, document or note, also when ARM quotes it in an error.
func TestSensitiveNeverLeaks(t *testing.T) {
	s := newStep(t)
	s.srv.Fail(armtest.Fault{Method: http.MethodPut, PathSuffix: "/web-sql", Status: 400, Code: "PasswordNotComplex",
		Message: fmt.Sprintf("Password validation failed. The password '%s' does not meet policy requirements.", canary), Times: 1})
	_, err := s.apply(s.plan())
	if err == nil || !strings.Contains(err.Error(), "PasswordNotComplex: Password validation failed. The password '(redacted)' does not meet") {
		t.Fatalf("apply: %v", err)
	}
	s.srv.Fail(armtest.Fault{Method: http.MethodGet, PathSuffix: "/web-sql", Status: 500, Code: "InternalServerError", Message: "echo " + canary, Times: 1})
	if p := s.plan(); len(p.Member.Holes) != 1 || !strings.Contains(p.Member.Holes[0].Reason, "echo (redacted)") {
		t.Errorf("holes %+v", p.Member.Holes)
	}
	out := s.deploy()
	if _, ok := out["withPassword"]; ok {
		t.Error("an output made of a secure value is given")
	}
	o, err := s.cap.Outputs(context.Background(), s.req())
	s.keepErr(err)
	s.keep(o)
	// checkCanary runs when the test ends; it must have something to read.
	if len(s.texts) < 6 {
		t.Fatalf("only %d texts kept", len(s.texts))
	}
}

// TestOutputs: Outputs reads the outputs of what was deployed; none before,
// and an output whose resource is gone is left out.
func TestOutputs(t *testing.T) {
	s := newStep(t)
	got, err := s.cap.Outputs(context.Background(), s.req())
	if err != nil || len(got) != 0 {
		t.Fatalf("outputs before any apply: %v, %v", got, err)
	}
	s.srv.CreateGroup(armtest.Subscription, "rg-web", "westeurope")
	if got, err := s.cap.Outputs(context.Background(), s.req()); err != nil || len(got) != 0 {
		t.Fatalf("outputs with the group but none of the resources: %v, %v", got, err)
	}
	s.deploy()
	got, err = s.cap.Outputs(context.Background(), s.req())
	if err != nil {
		t.Fatal(err)
	}
	s.keep(got)
	if diff := cmp.Diff([]string{"accountId", "blob", "sqlHost"}, sortedKeys(got)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	// Outputs needs no key and reads with the step's parameters missing
	// as far as it can.
	req := s.req()
	req.Key = nil
	req.Inputs["parameters"] = map[string]any{}
	got, err = s.cap.Outputs(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Errorf("outputs that read a parameter without a value: %v", outputs(got))
	}
	req.Inputs["parameters"] = map[string]any{"prefix": "web"}
	got, err = s.cap.Outputs(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"accountId", "blob", "sqlHost"}, sortedKeys(got)); diff != "" {
		t.Errorf("without the secure parameter (-want +got):\n%s", diff)
	}
	s.srv.Fail(armtest.Fault{Method: http.MethodGet, PathSuffix: "/web-sql", Status: 404, Code: "ResourceNotFound", Message: "gone"})
	got, err = s.cap.Outputs(context.Background(), s.req())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"accountId", "blob"}, sortedKeys(got)); diff != "" {
		t.Errorf("with the SQL server gone (-want +got):\n%s", diff)
	}
}

// TestToken: AZURE_ACCESS_TOKEN is sent as a bearer token and shows in no
// error.
func TestToken(t *testing.T) {
	s := newStep(t)
	s.srv.Token = "token-CANARY-0b1c"
	p := s.plan()
	if len(p.Member.Holes) != 1 || !strings.Contains(p.Member.Holes[0].Reason, "HTTP 401 AuthenticationFailed") {
		t.Errorf("without the token: holes %+v", p.Member.Holes)
	}
	t.Setenv(TokenEnv, "token-CANARY-0b1c")
	if p := s.plan(); len(p.Member.Holes) != 0 {
		t.Errorf("with the token: holes %+v", p.Member.Holes)
	}
	for _, text := range s.texts {
		if strings.Contains(text, "token-CANARY") {
			t.Errorf("the token shows in %s", text)
		}
	}
}

// TestShortKey: a key shorter than 32 bytes is refused before ARM is
// called.
func TestShortKey(t *testing.T) {
	s := newStep(t)
	s.key = []byte("too-short")
	_, err := s.cap.Plan(context.Background(), s.req())
	if !errors.Is(err, preview.ErrShortKey) {
		t.Errorf("plan: %v", err)
	}
	_, err = s.cap.Apply(context.Background(), s.req(), &preview.Plan{Member: changeset.Member{PlanDigest: DigestPrefix + "x"}})
	if !errors.Is(err, preview.ErrShortKey) {
		t.Errorf("apply: %v", err)
	}
	if r := s.srv.Requests(); len(r) != 0 {
		t.Errorf("requests %+v", r)
	}
}

// TestPlanErrors: what fails the plan, with the input named and no value.
func TestPlanErrors(t *testing.T) {
	cases := []struct {
		name  string
		setup func(s *step)
		want  string
	}{
		{"no location for a new group", func(s *step) { delete(s.inputs, "location") },
			"input location: resource group rg-web does not exist, and the step gives no location to create it in"},
		{"a group in another location", func(s *step) { s.srv.CreateGroup(armtest.Subscription, "rg-web", "East US") },
			"input location: resource group rg-web is in eastus, not westeurope, and ARM cannot move a group"},
		{"a function captf does not evaluate", func(s *step) {
			s.edit(`"[concat(parameters('prefix'), 'store')]"`, `"[uniqueString(resourceGroup().id)]"`)
		}, "template main.json: resources[0].name: variable account: uniqueString() is not a template function captf evaluates"},
		{"a name made of the secure value", func(s *step) {
			s.edit(`"[format('{0}-sql', parameters('prefix'))]"`, `"[parameters('adminPassword')]"`)
		}, "template main.json: resources[1].name: reads a secure value, which would show in the resource's id"},
		{"a cycle", func(s *step) {
			s.edit(`"kind": "StorageV2",`, `"kind": "StorageV2", "dependsOn": ["web-sql"],`)
			s.edit(`"version": "12.0"`, `"version": "12.0"}, "dependsOn": ["webstore"], "comments": {"x": 1`)
		}, "dependsOn makes a cycle among " + storageAddress + ", " + sqlAddress},
		{"a tag captf stamps", func(s *step) { s.edit(`"team": "web"`, `"captf-owner": "someone"`) },
			"resources[0] (" + storageAddress + ").tags: captf-owner is the tag captf stamps; the template cannot set it"},
		{"no template", func(s *step) { s.inputs["template"] = "nope.json" }, "input template: nope.json does not exist in the repository"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newStep(t)
			c.setup(s)
			_, err := s.cap.Plan(context.Background(), s.req())
			s.keepErr(err)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want %q", err, c.want)
			}
			if w := s.srv.Writes(); len(w) != 0 {
				t.Errorf("wrote %+v", w)
			}
		})
	}
}
