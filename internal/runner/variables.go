package runner

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/hcl/v2"

	"github.com/captf/captf/internal/modulecontract"
)

// The manager sets every variable of a kind's contract on each run of an
// object of that kind (a machine: its exports, name, failure domain,
// control plane flag and bootstrap data). A module must declare those the
// contract requires; the others it may leave out, so the runner passes an
// optional one to the module call only when the module declares it
// (terraform refuses an argument a module does not declare). The inputs
// Secret and the inputs hash are unchanged: the root still declares and
// sets the variable; only its argument to the module is left out.

// optionalVariables are the contracts' variables a module need not declare.
func optionalVariables() map[string]bool {
	optional := map[string]bool{}
	for _, role := range modulecontract.Roles() {
		c, _ := modulecontract.For(role)
		for _, v := range c.Variables {
			if !v.Required {
				optional[v.Name] = true
			}
		}
	}
	return optional
}

// variableSchema finds variable blocks.
var variableSchema = &hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{{Type: "variable", LabelNames: []string{"name"}}}}

// passDeclared removes from the root's call of ./module the arguments of
// optional contract variables the module's top-level files do not declare.
func (j *Job) passDeclared() error {
	if j.Module == "" {
		return nil
	}
	path := filepath.Join(j.Workdir, "main.tf.json")
	call, err := moduleCall(path)
	if err != nil || call == "" {
		return err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%w: inputs: %w", ErrBadInput, err)
	}
	var root map[string]any
	if err := json.Unmarshal(b, &root); err != nil {
		return fmt.Errorf("%w: inputs: main.tf.json: %w", ErrBadInput, err)
	}
	args, _ := root["module"].(map[string]any)[call].(map[string]any)
	optional := optionalVariables()
	var passed []string
	for name := range args {
		if optional[name] {
			passed = append(passed, name)
		}
	}
	if len(passed) == 0 {
		return nil
	}
	files, err := moduleFiles(j.Module)
	if err != nil {
		return err
	}
	declared := map[string]bool{}
	for _, f := range files {
		content, _, _ := f.Body.PartialContent(variableSchema)
		for _, block := range content.Blocks {
			declared[block.Labels[0]] = true
		}
	}
	dropped := false
	for _, name := range passed {
		if !declared[name] {
			delete(args, name)
			dropped = true
		}
	}
	if !dropped {
		return nil
	}
	out, err := json.Marshal(root)
	if err != nil {
		return fmt.Errorf("inputs: main.tf.json: %w", err)
	}
	return os.WriteFile(path, out, 0o600)
}
