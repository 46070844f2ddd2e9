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

// declares matches an output declaration in HCL or JSON syntax.
func declares(name string) *regexp.Regexp {
	return regexp.MustCompile(`(?m)^\s*output\s+"` + name + `"|"output"\s*:\s*\{[^}]*"` + name + `"`)
}

// forwardEndpoint writes endpointFile when the module's top-level files
// declare both endpoint outputs and the rendered root calls the module
// from ./module.
func (j *Job) forwardEndpoint() error {
	if j.Module == "" {
		return nil
	}
	files, err := filepath.Glob(filepath.Join(j.Module, "*.tf*"))
	if err != nil {
		return err
	}
	var src []byte
	for _, f := range files {
		if strings.HasSuffix(f, ".tf") || strings.HasSuffix(f, ".tf.json") {
			b, err := os.ReadFile(f)
			if err != nil {
				return fmt.Errorf("read the module: %w", err)
			}
			src = append(append(src, b...), '\n')
		}
	}
	if !declares(OutputEndpointHost).Match(src) || !declares(OutputEndpointPort).Match(src) {
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
