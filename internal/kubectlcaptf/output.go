package kubectlcaptf

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"
)

// The formats -o takes, as kubectl get's -o names them.
const (
	outputJSON = "json"
	outputYAML = "yaml"
)

// addOutputFlags adds -o and its older spelling --json.
func (o *options) addOutputFlags(cmd *cobra.Command) {
	cmd.PersistentFlags().StringVarP(&o.output, "output", "o", "", "print the objects as json or yaml instead of text")
	cmd.PersistentFlags().BoolVar(&o.json, "json", false, "print JSON instead of text (-o json)")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{outputJSON, outputYAML}, cobra.ShellCompDirectiveNoFileComp))
}

// checkOutput settles -o and --json before a command reaches the API
// server, so a misspelt format approves nothing.
func (o *options) checkOutput() error {
	switch o.output {
	case "", outputJSON, outputYAML:
	default:
		return fmt.Errorf("-o %s: want json or yaml", o.output)
	}
	if o.json {
		if o.output == outputYAML {
			return fmt.Errorf("--json and -o yaml ask for two formats; give one")
		}
		o.output = outputJSON
	}
	return nil
}

// structured says whether -o or --json asks for objects rather than text.
func (o *options) structured() bool { return o.output != "" }

// outputFlag is the flag that asked for objects, as the user wrote it.
func (o *options) outputFlag() string {
	if o.json {
		return "--json"
	}
	return "-o " + o.output
}

// writeObjects prints v, a Plan or a list of them, in the format -o
// names. YAML is the JSON document in YAML, with the same field names.
func (o *options) writeObjects(v any) error {
	if o.output == outputYAML {
		return writeYAML(o.streams.Out, v)
	}
	return writeJSON(o.streams.Out, v)
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func writeYAML(w io.Writer, v any) error {
	b, err := yaml.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}
