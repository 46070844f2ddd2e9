package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/captf/captf/internal/tfexec"
)

// The Cluster API infrastructure contract wants the workload cluster's
// API endpoint in spec.controlPlaneEndpoint. A module provides it through
// two outputs; the runner forwards them from the module call to the root
// and reports their values after an apply. They are the one pair of
// values a report carries, because the contract publishes them; a
// sensitive one is never reported.
const (
	OutputEndpointHost = "control_plane_endpoint_host"
	OutputEndpointPort = "control_plane_endpoint_port"
)

// endpointFile is the root file that forwards the module's outputs.
const endpointFile = "captf_endpoint.tf.json"

// Endpoint is the module's control plane endpoint.
type Endpoint struct {
	Host string `json:"host"`
	Port int32  `json:"port"`
}

// declaresHCL matches an output declaration in a .tf file.
func declaresHCL(name string) *regexp.Regexp {
	return regexp.MustCompile(`(?m)^\s*output\s+"` + regexp.QuoteMeta(name) + `"`)
}

// forwardEndpoint writes endpointFile when the module's top-level files
// declare both endpoint outputs and the rendered root calls the module
// from ./module.
func (j *Job) forwardEndpoint() error {
	if j.Module == "" {
		return nil
	}
	outputs, err := moduleOutputs(j.Module)
	if err != nil {
		return err
	}
	if !outputs[OutputEndpointHost] || !outputs[OutputEndpointPort] {
		return nil
	}
	call, err := moduleCall(filepath.Join(j.Workdir, "main.tf.json"))
	if err != nil || call == "" {
		return err
	}
	out := map[string]any{"output": map[string]any{
		OutputEndpointHost: map[string]string{"value": "${module." + call + "." + OutputEndpointHost + "}"},
		OutputEndpointPort: map[string]string{"value": "${module." + call + "." + OutputEndpointPort + "}"},
	}}
	b, _ := json.Marshal(out)
	return os.WriteFile(filepath.Join(j.Workdir, endpointFile), b, 0o600)
}

// moduleOutputs says which of the endpoint outputs the module's top-level
// files declare: .tf files by a line "output \"name\"", .tf.json files by
// the keys of "output" (an object, or a list of objects).
func moduleOutputs(dir string) (map[string]bool, error) {
	found := map[string]bool{OutputEndpointHost: false, OutputEndpointPort: false}
	files, err := filepath.Glob(filepath.Join(dir, "*.tf*"))
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		var b []byte
		if strings.HasSuffix(f, ".tf") || strings.HasSuffix(f, ".tf.json") {
			if b, err = os.ReadFile(f); err != nil {
				return nil, fmt.Errorf("read the module: %w", err)
			}
		}
		for _, name := range []string{OutputEndpointHost, OutputEndpointPort} {
			switch {
			case strings.HasSuffix(f, ".tf"):
				found[name] = found[name] || declaresHCL(name).Match(b)
			case strings.HasSuffix(f, ".tf.json"):
				found[name] = found[name] || declaresJSON(b, name)
			}
		}
	}
	return found, nil
}

// declaresJSON reports whether a .tf.json document declares output name.
func declaresJSON(b []byte, name string) bool {
	var doc struct {
		Output json.RawMessage `json:"output"`
	}
	if json.Unmarshal(b, &doc) != nil || doc.Output == nil {
		return false
	}
	var one map[string]json.RawMessage
	if json.Unmarshal(doc.Output, &one) == nil {
		_, ok := one[name]
		return ok
	}
	var many []map[string]json.RawMessage
	if json.Unmarshal(doc.Output, &many) == nil {
		for _, m := range many {
			if _, ok := m[name]; ok {
				return true
			}
		}
	}
	return false
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

// readEndpoint reads the forwarded outputs after an apply; nil when the
// module does not provide both or one of them is sensitive.
func readEndpoint(ctx context.Context, tf *tfexec.Terraform, workdir string) (*Endpoint, error) {
	if _, err := os.Stat(filepath.Join(workdir, endpointFile)); err != nil {
		return nil, nil
	}
	var outs map[string]struct {
		Sensitive bool            `json:"sensitive"`
		Value     json.RawMessage `json:"value"`
	}
	err := tf.Output(ctx, func(r io.Reader) error {
		dec := json.NewDecoder(r)
		dec.UseNumber()
		return dec.Decode(&outs)
	})
	if err != nil {
		return nil, fmt.Errorf("read the endpoint outputs: %w", err)
	}
	host, port := outs[OutputEndpointHost], outs[OutputEndpointPort]
	if host.Sensitive || port.Sensitive || host.Value == nil || port.Value == nil {
		return nil, nil
	}
	var e Endpoint
	if json.Unmarshal(host.Value, &e.Host) != nil || e.Host == "" {
		return nil, fmt.Errorf("%w: output %s is not a host name", ErrBadInput, OutputEndpointHost)
	}
	// A port may come as a number or as a string of digits.
	if err := json.Unmarshal(bytes.Trim(port.Value, `"`), &e.Port); err != nil || e.Port <= 0 {
		return nil, fmt.Errorf("%w: output %s is not a port number", ErrBadInput, OutputEndpointPort)
	}
	return &e, nil
}
