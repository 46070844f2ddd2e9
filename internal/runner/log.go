package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/captf/captf/internal/redact"
	"github.com/captf/captf/pkg/fingerprint"
)

// heldPlan holds terraform's output of a plan in a Log until the values
// the plan marks sensitive are read from its JSON (reading), then writes
// it with them hidden (release). Its methods do nothing on a nil Log.
type heldPlan struct {
	log *redact.Log
	// planned: the plan succeeded, so its output may show its values;
	// read: its sensitive values joined the Log's Set.
	planned, read bool
	// changed are the attributes the plan changes, once read.
	changed []fingerprint.Attributes
}

// holdPlan starts holding terraform's output in r.Log.
func (r *Runner) holdPlan() *heldPlan {
	if r.Log != nil {
		r.Log.Hold()
	}
	return &heldPlan{log: r.Log}
}

// reading returns read with the plan's JSON also read for its sensitive
// values, which join the Log's Set; read sees the JSON as before.
func (h *heldPlan) reading(read func(io.Reader) error) func(io.Reader) error {
	h.planned = true
	if h.log == nil {
		return read
	}
	return func(plan io.Reader) error {
		pr, pw := io.Pipe()
		var values *fingerprint.PlanValues
		var verr error
		done := make(chan struct{})
		go func() {
			defer close(done)
			values, verr = fingerprint.ReadValues(pr)
			// What ReadValues left, so that the writes never block.
			_, _ = io.Copy(io.Discard, pr)
		}()
		err := read(io.TeeReader(plan, pw))
		// The rest of the document, which read left, is read too.
		_, _ = io.Copy(pw, plan)
		pw.Close()
		<-done
		if verr == nil {
			h.read = h.add(values) == nil
			h.changed = values.Changed
		}
		return err
	}
}

func (h *heldPlan) add(values *fingerprint.PlanValues) error {
	for _, raw := range values.Sensitive {
		if err := h.log.AddJSON(raw); err != nil {
			return err
		}
	}
	return nil
}

// release writes what the Log held: redacted, unless the plan succeeded
// and its sensitive values could not be read; then it is left out.
func (h *heldPlan) release() {
	if h.log == nil {
		return
	}
	var discard string
	if h.planned && !h.read {
		discard = "the values the plan marks sensitive could not be read, to hide them"
	}
	_ = h.log.Release(discard)
}

// hideInputs adds to log the values of the sensitive variables of the
// inputs files (InputFiles): the root's variables declared sensitive,
// with their values in terraform.tfvars.json. Runs without a saved plan
// (apply, destroy, refresh) know no other.
func hideInputs(log *redact.Log, files [2][]byte) error {
	if log == nil {
		return nil
	}
	var root struct {
		Variable map[string]struct {
			Sensitive bool `json:"sensitive"`
		} `json:"variable"`
	}
	var values map[string]json.RawMessage
	if err := json.Unmarshal(files[0], &root); err != nil {
		return fmt.Errorf("%w: inputs: %s: %w", ErrBadInput, InputFiles[0], err)
	}
	if err := json.Unmarshal(files[1], &values); err != nil {
		return fmt.Errorf("%w: inputs: %s: %w", ErrBadInput, InputFiles[1], err)
	}
	for name, v := range root.Variable {
		if raw, ok := values[name]; ok && v.Sensitive {
			if err := log.AddJSON(raw); err != nil {
				return fmt.Errorf("%w: inputs: variable %s: %w", ErrBadInput, name, err)
			}
		}
	}
	return nil
}

// prepareUnplanned is prepare for a run that applies without a saved
// plan (a refresh, a destroy, an apply without approval): with r.Log, the
// values the state marks sensitive join its Set too, since terraform
// prints the state's values where it renders what it changes. A state
// that cannot be read is said in the log, and the run goes on.
func (r *Runner) prepareUnplanned(ctx context.Context) error {
	if err := r.prepare(ctx); err != nil || r.Log == nil {
		return err
	}
	var values *fingerprint.PlanValues
	err := r.TF.ShowState(ctx, func(state io.Reader) error {
		var err error
		values, err = fingerprint.ReadValues(state)
		return err
	})
	if err == nil {
		for _, raw := range values.Sensitive {
			if err = r.Log.AddJSON(raw); err != nil {
				break
			}
		}
	}
	if err != nil {
		fmt.Fprintf(r.Log.Stderr, "captf-runner: warning: the values the state marks sensitive could not be read, to hide them: %v\n", err)
	}
	return nil
}
