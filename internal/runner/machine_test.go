package runner

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestReadMachine(t *testing.T) {
	const canary = "CANARY-MACHINE-17"
	value := func(s string) outputValue { return outputValue{Value: json.RawMessage(s)} }
	many := make([]Address, maxAddresses+1)
	for i := range many {
		many[i] = Address{Type: "InternalIP", Address: "10.0.0.1"}
	}
	tooMany, _ := json.Marshal(many)
	long := make([]Address, 20)
	for i := range long {
		long[i] = Address{Type: "InternalDNS", Address: strings.Repeat("n", 120)}
	}
	tooLong, _ := json.Marshal(long)
	tests := []struct {
		name string
		outs map[string]outputValue
		want Message
		err  string
	}{
		{name: "all three", outs: map[string]outputValue{
			OutputProviderID:    value(`"captftest:///node-0"`),
			OutputAddresses:     value(`[{"type":"InternalIP","address":"10.0.0.4"},{"type":"Hostname","address":"node-0"}]`),
			OutputFailureDomain: value(`"zone-a"`),
		}, want: Message{ProviderID: "captftest:///node-0", Addresses: []Address{{"InternalIP", "10.0.0.4"}, {"Hostname", "node-0"}}, FailureDomain: "zone-a"}},
		{name: "none: a cluster's module", outs: map[string]outputValue{OutputHealth: value(`{"state":"running"}`)}},
		{name: "a sensitive provider ID", outs: map[string]outputValue{OutputProviderID: {Sensitive: true, Value: json.RawMessage(`"` + canary + `"`)}},
			err: "output provider_id is sensitive"},
		{name: "a provider ID that is no string", outs: map[string]outputValue{OutputProviderID: value(`{"id":"` + canary + `"}`)},
			err: "output provider_id is not a string"},
		{name: "an empty provider ID", outs: map[string]outputValue{OutputProviderID: value(`""`)}, err: "output provider_id is not a string"},
		{name: "an address of an unknown type", outs: map[string]outputValue{OutputAddresses: value(`[{"type":"InternalIP","address":"10.0.0.4"},{"type":"Public","address":"` + canary + `"}]`)},
			err: "output addresses: entry 1 is not an object"},
		{name: "addresses no list", outs: map[string]outputValue{OutputAddresses: value(`"` + canary + `"`)}, err: "output addresses: not a list"},
		{name: "too many addresses", outs: map[string]outputValue{OutputAddresses: value(string(tooMany))}, err: "33 entries, at most 32"},
		{name: "addresses too long for a report", outs: map[string]outputValue{OutputAddresses: value(string(tooLong))}, err: "more than the 2048 a Job's report holds"},
		{name: "a failure domain that is no string", outs: map[string]outputValue{OutputFailureDomain: value(`["` + canary + `"]`)}, err: "output failure_domain is not a string"},
		{name: "no failure domain: the empty string, as the Machine without one gives it", outs: map[string]outputValue{
			OutputProviderID: value(`"captftest:///node-0"`), OutputFailureDomain: value(`""`),
		}, want: Message{ProviderID: "captftest:///node-0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got Message
			err := readMachine(tt.outs, &got)
			if tt.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("(-want +got):\n%s", diff)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.err) || !errors.Is(err, ErrBadInput) {
				t.Fatalf("err = %v, want a bad input naming %q", err, tt.err)
			}
			if strings.Contains(err.Error(), canary) {
				t.Errorf("the error shows a value: %v", err)
			}
		})
	}
}
