package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/zclconf/go-cty/cty"

	"github.com/captf/captf/internal/modulecontract"
	"github.com/captf/captf/internal/tfexec"
)

// The Cluster API infrastructure contract wants the workload cluster's
// API endpoint in spec.controlPlaneEndpoint and its failure domains in
// status.failureDomains. A module provides them through outputs; the
// runner forwards those the module declares from the module call to the
// root and reports their values after an apply. They are the only values
// a report carries, because the contract publishes them; a sensitive one
// is never reported.
const (
	OutputEndpointHost   = modulecontract.OutputEndpointHost
	OutputEndpointPort   = modulecontract.OutputEndpointPort
	OutputFailureDomains = modulecontract.OutputFailureDomains
	// OutputExports is what a cluster's module publishes to its machines
	// and pools: forwarded to the root, so the state holds it, and read
	// by the manager from the state, never reported by the runner (it may
	// be larger than a report).
	OutputExports = modulecontract.OutputExports
)

// OutputProviderIDs are a pool's members' provider IDs: forwarded to the
// root, so the state holds them, and read by the manager from the state,
// never reported by the runner (up to 10,000 of them do not fit a
// report).
const OutputProviderIDs = modulecontract.OutputProviderIDs

// contractOutputs are the outputs the runner forwards, in order: the
// cluster contract's, the exports, the machine contract's (machine.go),
// a pool's members and their resources' addresses (replace.go), and the
// module's health (health.go).
var contractOutputs = []string{OutputEndpointHost, OutputEndpointPort, OutputFailureDomains, OutputExports, OutputProviderID, OutputAddresses, OutputFailureDomain, OutputProviderIDs, OutputMemberAddresses, OutputHealth}

// endpointFile is the root file that forwards the module's outputs.
const endpointFile = "captf_endpoint.tf.json"

// Endpoint is the module's control plane endpoint.
type Endpoint struct {
	Host string `json:"host"`
	Port int32  `json:"port"`
}

// FailureDomain is one entry of the module's failure_domains output.
type FailureDomain struct {
	Name         string            `json:"name"`
	ControlPlane bool              `json:"controlPlane"`
	Attributes   map[string]string `json:"attributes,omitempty"`
}

// Bounds of the failure_domains output: the API's, and what keeps the
// report within a termination message.
const (
	maxFailureDomains  = 100
	maxDomainName      = 256
	maxFailureDomainsB = 2048
)

// forwardEndpoint writes endpointFile when the module's top-level files
// declare the endpoint's outputs (both) or failure_domains, and the
// rendered root calls the module from ./module.
func (j *Job) forwardEndpoint() error {
	if j.Module == "" {
		return nil
	}
	outputs, err := moduleOutputs(j.Module)
	if err != nil {
		return err
	}
	if !outputs[OutputEndpointHost].Declared || !outputs[OutputEndpointPort].Declared {
		delete(outputs, OutputEndpointHost)
		delete(outputs, OutputEndpointPort)
	}
	declared := slices.DeleteFunc(slices.Clone(contractOutputs), func(name string) bool { return !outputs[name].Declared })
	if len(declared) == 0 {
		return nil
	}
	call, err := moduleCall(filepath.Join(j.Workdir, "main.tf.json"))
	if err != nil || call == "" {
		return err
	}
	forward := map[string]any{}
	for _, name := range declared {
		forward[name] = map[string]any{"value": "${module." + call + "." + name + "}", "sensitive": outputs[name].Sensitive}
	}
	b, _ := json.Marshal(map[string]any{"output": forward})
	return os.WriteFile(filepath.Join(j.Workdir, endpointFile), b, 0o600)
}

// moduleOutput is what the module's top-level files say of one of the
// contract's outputs.
type moduleOutput struct {
	Declared bool
	// Sensitive: declared with sensitive = true. Forwarded as such, so that
	// terraform accepts the root's output and the runner never reports it.
	Sensitive bool
}

// outputSchema finds output blocks, and the sensitive argument in one.
var (
	outputSchema    = &hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{{Type: "output", LabelNames: []string{"name"}}}}
	sensitiveSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "sensitive"}}}
)

// moduleOutputs says which of the contract's outputs the module's top-level
// .tf and .tf.json files declare, and which of those are sensitive. A file
// that does not parse is left to terraform to report.
func moduleOutputs(dir string) (map[string]moduleOutput, error) {
	found := map[string]moduleOutput{}
	for _, name := range contractOutputs {
		found[name] = moduleOutput{}
	}
	files, err := moduleFiles(dir)
	if err != nil {
		return nil, err
	}
	for _, file := range files {
		content, _, _ := file.Body.PartialContent(outputSchema)
		for _, block := range content.Blocks {
			name := block.Labels[0]
			if _, ok := found[name]; !ok {
				continue
			}
			out := moduleOutput{Declared: true}
			attrs, _, _ := block.Body.PartialContent(sensitiveSchema)
			if a, ok := attrs.Attributes["sensitive"]; ok {
				v, diags := a.Expr.Value(nil)
				out.Sensitive = !diags.HasErrors() && v.Type() == cty.Bool && v.IsKnown() && !v.IsNull() && v.True()
			}
			found[name] = out
		}
	}
	return found, nil
}

// moduleFiles are the module's top-level .tf and .tf.json files that
// parse; one that does not is left to terraform to report.
func moduleFiles(dir string) ([]*hcl.File, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.tf*"))
	if err != nil {
		return nil, err
	}
	parser := hclparse.NewParser()
	var files []*hcl.File
	for _, f := range paths {
		var file *hcl.File
		var diags hcl.Diagnostics
		switch {
		case strings.HasSuffix(f, ".tf"):
			file, diags = parser.ParseHCLFile(f)
		case strings.HasSuffix(f, ".tf.json"):
			file, diags = parser.ParseJSONFile(f)
		default:
			continue
		}
		if !diags.HasErrors() {
			files = append(files, file)
		}
	}
	return files, nil
}

// moduleCall is the name under which the rendered root calls ./module.
func moduleCall(mainTF string) (string, error) {
	b, err := os.ReadFile(mainTF)
	if err != nil {
		return "", fmt.Errorf("%w: inputs: %w", ErrBadInput, err)
	}
	var root struct {
		Module map[string]struct {
			Source string `json:"source"`
		} `json:"module"`
	}
	if err := json.Unmarshal(b, &root); err != nil {
		return "", fmt.Errorf("%w: inputs: main.tf.json: %w", ErrBadInput, err)
	}
	for name, m := range root.Module {
		if m.Source == "./module" {
			return name, nil
		}
	}
	return "", nil
}

// outputValue is one root output as output -json gives it.
type outputValue struct {
	Sensitive bool            `json:"sensitive"`
	Value     json.RawMessage `json:"value"`
}

// forwardedOutputs reads the root's outputs, nil when it forwards none of
// the module's. The values stay in memory.
func forwardedOutputs(ctx context.Context, tf *tfexec.Terraform, workdir string) (map[string]outputValue, error) {
	if _, err := os.Stat(filepath.Join(workdir, endpointFile)); err != nil {
		return nil, nil
	}
	var outs map[string]outputValue
	err := tf.Output(ctx, func(r io.Reader) error {
		dec := json.NewDecoder(r)
		dec.UseNumber()
		return dec.Decode(&outs)
	})
	if err != nil {
		return nil, fmt.Errorf("read the contract's outputs: %w", err)
	}
	return outs, nil
}

// readContract reads the forwarded outputs after an apply into msg: the
// endpoint when the module provides both and neither is sensitive, the
// failure domains when it provides them and they are not sensitive, the
// health's state word, and a machine's provider ID, addresses and failure
// domain (readMachine).
func readContract(ctx context.Context, tf *tfexec.Terraform, workdir string, msg *Message) error {
	outs, err := forwardedOutputs(ctx, tf, workdir)
	if err != nil || outs == nil {
		return err
	}
	msg.Health = healthState(outs)
	host, port := outs[OutputEndpointHost], outs[OutputEndpointPort]
	if !host.Sensitive && !port.Sensitive && host.Value != nil && port.Value != nil {
		var e Endpoint
		if json.Unmarshal(host.Value, &e.Host) != nil || e.Host == "" {
			return fmt.Errorf("%w: output %s is not a host name", ErrBadInput, OutputEndpointHost)
		}
		// A port may come as a number or as a string of digits.
		if err := json.Unmarshal(bytes.Trim(port.Value, `"`), &e.Port); err != nil || e.Port <= 0 {
			return fmt.Errorf("%w: output %s is not a port number", ErrBadInput, OutputEndpointPort)
		}
		msg.Endpoint = &e
	}
	if fd := outs[OutputFailureDomains]; !fd.Sensitive && fd.Value != nil {
		domains, err := parseFailureDomains(fd.Value)
		if err != nil {
			return fmt.Errorf("%w: output %s: %w", ErrBadInput, OutputFailureDomains, err)
		}
		msg.FailureDomains = domains
	}
	return readMachine(outs, msg)
}

// parseFailureDomains reads the failure_domains output: a list of names
// (each may hold control plane machines), a list of objects with name,
// control_plane (default true) and attributes (strings), or an object of
// such objects by name. The result is sorted by name. An error names the
// entry by its position, never by a value.
func parseFailureDomains(raw json.RawMessage) ([]FailureDomain, error) {
	type entry struct {
		Name         *string           `json:"name"`
		ControlPlane *bool             `json:"control_plane"`
		Attributes   map[string]string `json:"attributes"`
	}
	var entries []entry
	var names []string
	var byName map[string]entry
	switch {
	case json.Unmarshal(raw, &names) == nil:
		for i := range names {
			entries = append(entries, entry{Name: &names[i]})
		}
	case json.Unmarshal(raw, &byName) == nil:
		for name, e := range byName {
			e.Name = &name
			entries = append(entries, e)
		}
	default:
		var list []json.RawMessage
		if json.Unmarshal(raw, &list) != nil {
			return nil, errors.New("not a list of names, a list of objects or an object of objects")
		}
		for i, item := range list {
			var e entry
			if err := json.Unmarshal(item, &e); err != nil {
				return nil, fmt.Errorf("entry %d is not an object with a name, control_plane (bool) and attributes (strings)", i)
			}
			entries = append(entries, e)
		}
	}
	if len(entries) > maxFailureDomains {
		return nil, fmt.Errorf("%d entries, at most %d", len(entries), maxFailureDomains)
	}
	domains := make([]FailureDomain, 0, len(entries))
	seen := map[string]bool{}
	for i, e := range entries {
		if e.Name == nil || *e.Name == "" || len(*e.Name) > maxDomainName {
			return nil, fmt.Errorf("entry %d has no name of 1 to %d characters", i, maxDomainName)
		}
		if seen[*e.Name] {
			return nil, fmt.Errorf("entry %d repeats a name", i)
		}
		seen[*e.Name] = true
		d := FailureDomain{Name: *e.Name, ControlPlane: e.ControlPlane == nil || *e.ControlPlane, Attributes: e.Attributes}
		domains = append(domains, d)
	}
	slices.SortFunc(domains, func(a, b FailureDomain) int { return strings.Compare(a.Name, b.Name) })
	if b, _ := json.Marshal(domains); len(b) > maxFailureDomainsB {
		return nil, fmt.Errorf("%d bytes, more than the %d a Job's report holds", len(b), maxFailureDomainsB)
	}
	return domains, nil
}
