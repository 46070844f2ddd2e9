package fingerprint

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"strings"
)

// PlanValues is what a plan's log needs of the plan's values. Unlike the
// rest of this package it holds values: the sensitive ones, so that a log
// can hide them. Keep it in memory only.
type PlanValues struct {
	// Sensitive holds the JSON of each value the plan marks sensitive:
	// the values of the root's sensitive variables, the parts of each
	// resource change's before and after (and of each drift) that
	// before_sensitive and after_sensitive mark, the parts of the prior
	// state's resources that their sensitive_values mark, and the values
	// of sensitive outputs. A value may be a whole object or list.
	Sensitive []json.RawMessage
	// Changed names, for each resource change that creates, updates or
	// replaces a resource, the top-level attributes whose value it
	// changes or leaves unknown until apply: names, never a value.
	Changed []Attributes
}

// Attributes are the top-level attributes a resource change changes.
type Attributes struct {
	Address string
	// Action is create, update or replace.
	Action string
	Names  []string
}

// ReadValues reads a plan document (terraform show -json) from r, one
// resource change at a time, and returns what PlanValues holds. It reads
// the sections terraform's human rendering of the plan prints values
// from (variables, resource changes and drift, output changes) and the
// state before the plan (prior_state), and skips the others
// (planned_values repeats the changes' values). It reads a state
// document (show -json without a plan) too: the values its resources'
// sensitive_values mark, and its sensitive outputs.
func ReadValues(r io.Reader) (*PlanValues, error) {
	d := json.NewDecoder(r)
	v := &PlanValues{}
	if err := delim(d, '{'); err != nil {
		return nil, fmt.Errorf("%w: plan document: %w", ErrMalformedPlan, err)
	}
	var variables map[string]struct {
		Value json.RawMessage `json:"value"`
	}
	var config struct {
		RootModule struct {
			Variables map[string]struct {
				Sensitive bool `json:"sensitive"`
			} `json:"variables"`
		} `json:"root_module"`
	}
	for d.More() {
		name, err := d.Token()
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrMalformedPlan, err)
		}
		switch name {
		case "variables":
			err = d.Decode(&variables)
		case "configuration":
			err = d.Decode(&config)
		case "resource_changes", "resource_drift":
			err = elements(d, '[', func() error {
				var rc struct {
					Address string      `json:"address"`
					Mode    string      `json:"mode"`
					Change  valueChange `json:"change"`
				}
				if err := d.Decode(&rc); err != nil {
					return err
				}
				v.change(rc.Change)
				if name == "resource_changes" && rc.Mode != "data" {
					v.attributes(rc.Address, rc.Change)
				}
				return nil
			})
		case "values", "prior_state":
			// A state (show -json without a plan), or the plan's state
			// before it.
			var state stateValues
			if name == "prior_state" {
				var prior struct {
					Values stateValues `json:"values"`
				}
				err = d.Decode(&prior)
				state = prior.Values
			} else {
				err = d.Decode(&state)
			}
			v.state(state)
		case "output_changes":
			err = elements(d, '{', func() error {
				if _, err := d.Token(); err != nil {
					return err
				}
				var c valueChange
				if err := d.Decode(&c); err != nil {
					return err
				}
				v.change(c)
				return nil
			})
		default:
			err = skip(d)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrMalformedPlan, name, err)
		}
	}
	if err := delim(d, '}'); err != nil {
		return nil, fmt.Errorf("%w: plan document: %w", ErrMalformedPlan, err)
	}
	for name, decl := range config.RootModule.Variables {
		if decl.Sensitive && len(variables[name].Value) > 0 {
			v.Sensitive = append(v.Sensitive, variables[name].Value)
		}
	}
	return v, nil
}

// stateValues are the values of a state, with their sensitivity.
type stateValues struct {
	Outputs map[string]struct {
		Sensitive bool            `json:"sensitive"`
		Value     json.RawMessage `json:"value"`
	} `json:"outputs"`
	RootModule stateModule `json:"root_module"`
}

type stateModule struct {
	Resources []struct {
		Values          json.RawMessage `json:"values"`
		SensitiveValues json.RawMessage `json:"sensitive_values"`
	} `json:"resources"`
	ChildModules []stateModule `json:"child_modules"`
}

func (v *PlanValues) state(s stateValues) {
	for _, o := range s.Outputs {
		if o.Sensitive {
			v.marked(o.Value, json.RawMessage("true"))
		}
	}
	v.module(s.RootModule)
}

func (v *PlanValues) module(m stateModule) {
	for _, r := range m.Resources {
		v.marked(r.Values, r.SensitiveValues)
	}
	for _, c := range m.ChildModules {
		v.module(c)
	}
}

// valueChange is the part of a resource or output change that holds
// values and their sensitivity.
type valueChange struct {
	Actions         []string        `json:"actions"`
	Before          json.RawMessage `json:"before"`
	After           json.RawMessage `json:"after"`
	BeforeSensitive json.RawMessage `json:"before_sensitive"`
	AfterSensitive  json.RawMessage `json:"after_sensitive"`
	AfterUnknown    json.RawMessage `json:"after_unknown"`
}

func (v *PlanValues) change(c valueChange) {
	v.marked(c.Before, c.BeforeSensitive)
	v.marked(c.After, c.AfterSensitive)
}

// attributes adds what c changes of the resource at address, when it
// creates, updates or replaces it.
func (v *PlanValues) attributes(address string, c valueChange) {
	var action string
	switch strings.Join(c.Actions, ",") {
	case "create":
		action = "create"
	case "update":
		action = "update"
	case "delete,create", "create,delete":
		action = "replace"
	default:
		return
	}
	var before, after map[string]any
	var unknown map[string]json.RawMessage
	// A null before (a create) or after decodes to no attributes.
	_ = decodeNumbers(c.Before, &before)
	_ = decodeNumbers(c.After, &after)
	_ = json.Unmarshal(c.AfterUnknown, &unknown)
	names := map[string]bool{}
	for k, a := range after {
		if b, ok := before[k]; !ok && a != nil || ok && !reflect.DeepEqual(a, b) {
			names[k] = true
		}
	}
	for k, b := range before {
		if _, ok := after[k]; !ok && b != nil {
			names[k] = true
		}
	}
	for k, u := range unknown {
		var mask any
		if json.Unmarshal(u, &mask) == nil && marksSome(mask) {
			names[k] = true
		}
	}
	if len(names) == 0 {
		return
	}
	v.Changed = append(v.Changed, Attributes{Address: address, Action: action, Names: slices.Sorted(maps.Keys(names))})
}

// marksSome reports whether an after_unknown mask marks anything.
func marksSome(mask any) bool {
	switch m := mask.(type) {
	case bool:
		return m
	case map[string]any:
		return slices.ContainsFunc(slices.Collect(maps.Values(m)), marksSome)
	case []any:
		return slices.ContainsFunc(m, marksSome)
	}
	return false
}

// decodeNumbers decodes raw into v, numbers as written.
func decodeNumbers(raw json.RawMessage, v any) error {
	if len(raw) == 0 {
		return nil
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	return d.Decode(v)
}

// marked adds the parts of value that mask marks sensitive: all of it
// where the mask is true, the entries the mask names where it is an
// object or a list.
func (v *PlanValues) marked(value, mask json.RawMessage) {
	value, mask = bytes.TrimSpace(value), bytes.TrimSpace(mask)
	if len(value) == 0 || bytes.Equal(value, []byte("null")) || len(mask) == 0 {
		return
	}
	switch mask[0] {
	case 't':
		v.Sensitive = append(v.Sensitive, value)
	case '{':
		var masks, values map[string]json.RawMessage
		if json.Unmarshal(mask, &masks) != nil || json.Unmarshal(value, &values) != nil {
			return
		}
		for k, m := range masks {
			v.marked(values[k], m)
		}
	case '[':
		var masks, values []json.RawMessage
		if json.Unmarshal(mask, &masks) != nil || json.Unmarshal(value, &values) != nil {
			return
		}
		for i, m := range masks {
			if i < len(values) {
				v.marked(values[i], m)
			}
		}
	}
}

// delim reads the delimiter want.
func delim(d *json.Decoder, want json.Delim) error {
	t, err := d.Token()
	if err != nil {
		return err
	}
	if t != want {
		return fmt.Errorf("%v where %v was expected", t, want)
	}
	return nil
}

// elements reads a list (open '[') or an object (open '{') and calls each
// for every element; for an object, each reads the key too. A null is an
// empty list or object.
func elements(d *json.Decoder, open json.Delim, each func() error) error {
	t, err := d.Token()
	if err != nil || t == nil {
		return err
	}
	if t != open {
		return fmt.Errorf("%v where %v was expected", t, open)
	}
	for d.More() {
		if err := each(); err != nil {
			return err
		}
	}
	_, err = d.Token()
	return err
}

// skip reads one value, token by token, holding none of it.
func skip(d *json.Decoder) error {
	depth := 0
	for {
		t, err := d.Token()
		if err != nil {
			return err
		}
		switch t {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
		if depth == 0 {
			return nil
		}
	}
}
