package arm

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func decode(t *testing.T, s string) map[string]any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestCompare: only what the template declares is compared, after the
// noise rules; what the server adds never counts.
func TestCompare(t *testing.T) {
	// What ARM returns for a storage account the template below declares.
	live := `{
	  "id": "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Storage/storageAccounts/web",
	  "name": "web", "type": "Microsoft.Storage/storageAccounts",
	  "etag": "W/\"datetime'2026-01-02T03%3A04%3A05Z'\"",
	  "systemData": {"createdBy": "someone", "createdAt": "2026-01-02T03:04:05Z"},
	  "location": "westeurope",
	  "kind": "StorageV2",
	  "sku": {"name": "Standard_LRS", "tier": "Standard"},
	  "tags": {"team": "web", "captf-owner": "app", "captf-secure": "hmac-sha256:00"},
	  "properties": {
	    "provisioningState": "Succeeded", "creationTime": "2026-01-02T03:04:05Z",
	    "primaryEndpoints": {"blob": "https://web.blob.core.windows.net/"},
	    "accessTier": "Hot", "minimumTlsVersion": "TLS1_2", "allowBlobPublicAccess": false,
	    "networkAcls": {"defaultAction": "Deny", "ipRules": [{"value": "1.2.3.4", "action": "Allow"}]},
	    "subnetId": "/subscriptions/S/resourcegroups/RG/providers/Microsoft.Network/virtualNetworks/v/subnets/a",
	    "retentionDays": 7, "emptyList": [], "emptyObject": {},
	    "definition": {"$schema": "https://schema.example/2016-06-01"}
	  }
	}`
	cases := []struct {
		name string
		want string
		// changes are "path: before → after".
		changes []string
	}{
		{"equal, with server fields, defaults and captf's tags left out", `{
		  "location": "West Europe", "kind": "StorageV2", "sku": {"name": "Standard_LRS"},
		  "tags": {"team": "web"},
		  "properties": {"minimumTlsVersion": "TLS1_2", "allowBlobPublicAccess": false,
		    "networkAcls": {"defaultAction": "Deny", "ipRules": [{"value": "1.2.3.4"}]},
		    "subnetId": "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v/subnets/a",
		    "retentionDays": 7.0, "provisioningState": "Creating", "missingButEmpty": [], "emptyObject": {}, "nothing": null}
		}`, nil},
		{"changed leaves", `{
		  "location": "westeurope", "sku": {"name": "Premium_LRS"},
		  "tags": {"team": "api", "cost": "1"},
		  "properties": {"minimumTlsVersion": "TLS1_2", "allowBlobPublicAccess": true,
		    "networkAcls": {"ipRules": [{"value": "1.2.3.4"}, {"value": "5.6.7.8"}]}}
		}`, []string{
			`properties.allowBlobPublicAccess: false → true`,
			`properties.networkAcls.ipRules: [{"action":"Allow","value":"1.2.3.4"}] → [{"value":"1.2.3.4"},{"value":"5.6.7.8"}]`,
			`sku.name: "Standard_LRS" → "Premium_LRS"`,
			`tags.cost: (none) → "1"`,
			`tags.team: "web" → "api"`,
		}},
		{"another type is a change of the whole value", `{"properties": {"networkAcls": "none", "retentionDays": "7"}}`, []string{
			`properties.networkAcls: {"defaultAction":"Deny","ipRules":[{"action":"Allow","value":"1.2.3.4"}]} → "none"`,
			`properties.retentionDays: 7 → "7"`,
		}},
		// The names the plan shows and the secure-value digest holds: '$'
		// is written bare, a key with a colon or a slash is quoted.
		{"property names with a dollar and a slash", `{
		  "tags": {"hidden-link:/app": "x"},
		  "properties": {"definition": {"$schema": "https://schema.example/2019-05-01"}}
		}`, []string{
			`properties.definition.$schema: "https://schema.example/2016-06-01" → "https://schema.example/2019-05-01"`,
			`tags["hidden-link:/app"]: (none) → "x"`,
		}},
		{"another location", `{"location": "East US"}`, []string{`location: "westeurope" → "East US"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got []change
			var secrets []secretLeaf
			compare(nil, withoutNoise(decode(t, c.want)), withoutNoise(decode(t, live)), true, &got, &secrets)
			if diff := cmp.Diff(c.changes, render(t, got)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// render writes changes as "path: before → after".
func render(t *testing.T, changes []change) []string {
	t.Helper()
	var out []string
	for _, c := range changes {
		a, err := c.attribute()
		if err != nil {
			t.Fatal(err)
		}
		side := func(raw json.RawMessage) string {
			if raw == nil {
				return "(none)"
			}
			return string(raw)
		}
		s := a.Name + ": " + side(a.Before) + " → " + side(a.After)
		if a.Unknown {
			s += " (unknown)"
		}
		if a.Sensitive {
			s = a.Name + ": (sensitive)"
			if a.Unknown {
				s += " (unknown)"
			}
		}
		out = append(out, s)
	}
	return out
}

// TestCompareMarks: a value known only after apply is a change that keeps
// its before, unless it is sensitive; a secure value is left to the
// secrets' own comparison.
func TestCompareMarks(t *testing.T) {
	want := map[string]any{
		"properties": map[string]any{
			"endpoint": unknownValue{},
			"newKey":   unknownValue{},
			"key":      unknownValue{Sensitive: true},
			"password": secretValue{"CANARY-PW"},
			"list":     []any{"a", unknownValue{}},
		},
	}
	live := map[string]any{"properties": map[string]any{"endpoint": "https://old/", "key": "CANARY-LIVE-KEY", "password": "CANARY-PW", "list": []any{"a"}}}
	var got []change
	var secrets []secretLeaf
	compare(nil, want, live, true, &got, &secrets)
	if diff := cmp.Diff([]string{
		`properties.endpoint: "https://old/" → (none) (unknown)`,
		`properties.key: (sensitive) (unknown)`,
		`properties.list: ["a"] → (none) (unknown)`,
		`properties.newKey: (none) → (none) (unknown)`,
	}, render(t, got)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]secretLeaf{{Path: path{"properties", "password"}, Value: "CANARY-PW"}}, secrets); diff != "" {
		t.Errorf("secrets (-want +got):\n%s", diff)
	}
	for _, c := range render(t, got) {
		if strings.Contains(c, "CANARY") {
			t.Errorf("a change shows a secret: %s", c)
		}
	}
}

// TestDeclared: a create lists every leaf the body declares.
func TestDeclared(t *testing.T) {
	var got []change
	declared(nil, map[string]any{
		"location": "westeurope",
		"tags":     map[string]any{"a.b": "c"},
		"zones":    []any{"1"},
		"properties": map[string]any{
			"empty": map[string]any{}, "none": []any{}, "password": secretValue{"CANARY"},
			"endpoint": unknownValue{}, "keys": unknownValue{Sensitive: true},
		},
	}, &got)
	if diff := cmp.Diff([]string{
		`location: (none) → "westeurope"`,
		`properties.empty: (none) → {}`,
		`properties.endpoint: (none) → (none) (unknown)`,
		`properties.keys: (sensitive) (unknown)`,
		`properties.none: (none) → []`,
		`properties.password: (sensitive)`,
		`tags["a.b"]: (none) → "c"`,
		`zones.0: (none) → "1"`,
	}, render(t, got)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
