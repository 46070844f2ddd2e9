package runner

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/captf/captf/internal/modulecontract"
)

// A machine's module provides, through outputs, what the Cluster API
// InfraMachine contract publishes: the provider ID (spec.providerID, the
// Node's), the addresses and the failure domain the machine landed in
// (status.addresses, status.failureDomain). Forwarded to the root and
// reported after an apply like the cluster's endpoint; a sensitive one
// fails the Job, since it must be published.
const (
	OutputProviderID    = modulecontract.OutputProviderID
	OutputAddresses     = modulecontract.OutputAddresses
	OutputFailureDomain = modulecontract.OutputFailureDomain
)

// Address is one entry of the module's addresses output.
type Address struct {
	Type    string `json:"type"`
	Address string `json:"address"`
}

// Bounds of the machine's outputs: the API's, and what keeps the report
// within a termination message.
const (
	maxProviderID = 512
	maxAddresses  = 32
	maxAddress    = 256
	maxAddressesB = 2048
)

// readMachine reads a machine's forwarded outputs into msg. An error names
// the output, and an entry by its position, never a value.
func readMachine(outs map[string]outputValue, msg *Message) error {
	for _, name := range []string{OutputProviderID, OutputAddresses, OutputFailureDomain} {
		if out, ok := outs[name]; ok && out.Sensitive {
			return fmt.Errorf("%w: output %s is sensitive, and the Cluster API contract publishes it: declare it without sensitive", ErrBadInput, name)
		}
	}
	if v := outs[OutputProviderID].Value; v != nil {
		if json.Unmarshal(v, &msg.ProviderID) != nil || msg.ProviderID == "" || len(msg.ProviderID) > maxProviderID {
			return fmt.Errorf("%w: output %s is not a string of 1 to %d characters", ErrBadInput, OutputProviderID, maxProviderID)
		}
	}
	if v := outs[OutputAddresses].Value; v != nil {
		addrs, err := parseAddresses(v)
		if err != nil {
			return fmt.Errorf("%w: output %s: %w", ErrBadInput, OutputAddresses, err)
		}
		msg.Addresses = addrs
	}
	if v := outs[OutputFailureDomain].Value; v != nil {
		// "" is none, as captf_failure_domain gives a Machine without
		// one: a module may pass its own through.
		if json.Unmarshal(v, &msg.FailureDomain) != nil || len(msg.FailureDomain) > maxDomainName {
			return fmt.Errorf("%w: output %s is not a string of at most %d characters", ErrBadInput, OutputFailureDomain, maxDomainName)
		}
	}
	return nil
}

// parseAddresses reads the addresses output: a list of objects with type
// (Hostname, ExternalIP, InternalIP, ExternalDNS or InternalDNS) and
// address.
func parseAddresses(raw json.RawMessage) ([]Address, error) {
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) != nil {
		return nil, errors.New("not a list of objects with type and address")
	}
	if len(list) > maxAddresses {
		return nil, fmt.Errorf("%d entries, at most %d", len(list), maxAddresses)
	}
	addrs := make([]Address, 0, len(list))
	for i, item := range list {
		var a Address
		if json.Unmarshal(item, &a) != nil || !slices.Contains(modulecontract.AddressTypes, a.Type) || a.Address == "" || len(a.Address) > maxAddress {
			return nil, fmt.Errorf("entry %d is not an object with a type (Hostname, ExternalIP, InternalIP, ExternalDNS or InternalDNS) and an address of 1 to %d characters", i, maxAddress)
		}
		addrs = append(addrs, a)
	}
	if b, _ := json.Marshal(addrs); len(b) > maxAddressesB {
		return nil, fmt.Errorf("%d bytes, more than the %d a Job's report holds", len(b), maxAddressesB)
	}
	return addrs, nil
}
