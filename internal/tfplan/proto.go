package tfplan

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// The messages of terraform's tfplan file (internal/plans/planproto,
// planfile.proto, format version 3) that the plan document needs, read
// with protowire: the field numbers below are that file's.

type plan struct {
	version          uint64
	terraformVersion string
	errored          bool
	variables        map[string][]byte // msgpack of the dynamic type
	resources        []resourceChange
	outputs          []outputChange
	// unsupported names a part of the plan this package does not render
	// (deferred changes, action invocations): the caller falls back to
	// terraform show.
	unsupported string
}

type resourceChange struct {
	addr, prevRunAddr, deposedKey, provider string
	change                                  change
}

type outputChange struct {
	name      string
	change    change
	sensitive bool
}

type change struct {
	action                uint64
	values                [][]byte
	beforeSens, afterSens []path
	importing             *importing
	beforeIdentity        []byte
	afterIdentity         []byte
	hasGenerated          bool
}

type importing struct {
	id       string
	unknown  bool
	identity []byte
}

// path is a list of steps: an attribute name, or an element key as msgpack
// of the dynamic type.
type path []pathStep

type pathStep struct {
	attr string
	key  []byte
}

// fields calls f for each field of the message b.
func fields(b []byte, f func(num protowire.Number, typ protowire.Type, v []byte, n uint64) error) error {
	for len(b) > 0 {
		num, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return protowire.ParseError(l)
		}
		b = b[l:]
		var v []byte
		var n uint64
		switch typ {
		case protowire.VarintType:
			n, l = protowire.ConsumeVarint(b)
		case protowire.BytesType:
			v, l = protowire.ConsumeBytes(b)
		default:
			l = protowire.ConsumeFieldValue(num, typ, b)
		}
		if l < 0 {
			return protowire.ParseError(l)
		}
		b = b[l:]
		if err := f(num, typ, v, n); err != nil {
			return err
		}
	}
	return nil
}

func decodePlan(b []byte) (*plan, error) {
	p := &plan{variables: map[string][]byte{}}
	err := fields(b, func(num protowire.Number, typ protowire.Type, v []byte, n uint64) error {
		switch num {
		case 1:
			p.version = n
		case 2:
			var k string
			var val []byte
			err := fields(v, func(num protowire.Number, _ protowire.Type, v []byte, _ uint64) error {
				switch num {
				case 1:
					k = string(v)
				case 2:
					var err error
					val, err = dynamicValue(v)
					return err
				}
				return nil
			})
			if err != nil {
				return err
			}
			p.variables[k] = val
		case 3:
			rc, err := decodeResourceChange(v)
			if err != nil {
				return err
			}
			p.resources = append(p.resources, rc)
		case 4:
			oc, err := decodeOutputChange(v)
			if err != nil {
				return err
			}
			p.outputs = append(p.outputs, oc)
		case 14:
			p.terraformVersion = string(v)
		case 20:
			p.errored = n != 0
		case 27, 31:
			p.unsupported = "deferred changes"
		case 30:
			p.unsupported = "action invocations"
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("tfplan: %w", err)
	}
	return p, nil
}

func decodeResourceChange(b []byte) (resourceChange, error) {
	var rc resourceChange
	err := fields(b, func(num protowire.Number, _ protowire.Type, v []byte, _ uint64) error {
		switch num {
		case 13:
			rc.addr = string(v)
		case 14:
			rc.prevRunAddr = string(v)
		case 7:
			rc.deposedKey = string(v)
		case 8:
			rc.provider = string(v)
		case 9:
			var err error
			rc.change, err = decodeChange(v)
			return err
		}
		return nil
	})
	if rc.addr == "" && err == nil {
		err = errors.New("a resource change without an address")
	}
	return rc, err
}

func decodeOutputChange(b []byte) (outputChange, error) {
	var oc outputChange
	err := fields(b, func(num protowire.Number, _ protowire.Type, v []byte, n uint64) error {
		switch num {
		case 1:
			oc.name = string(v)
		case 2:
			var err error
			oc.change, err = decodeChange(v)
			return err
		case 3:
			oc.sensitive = n != 0
		}
		return nil
	})
	return oc, err
}

func decodeChange(b []byte) (change, error) {
	var c change
	err := fields(b, func(num protowire.Number, _ protowire.Type, v []byte, n uint64) error {
		var err error
		switch num {
		case 1:
			c.action = n
		case 2:
			var d []byte
			if d, err = dynamicValue(v); err == nil {
				c.values = append(c.values, d)
			}
		case 3, 4:
			var p path
			if p, err = decodePath(v); err == nil {
				if num == 3 {
					c.beforeSens = append(c.beforeSens, p)
				} else {
					c.afterSens = append(c.afterSens, p)
				}
			}
		case 5:
			c.importing = &importing{}
			err = fields(v, func(num protowire.Number, _ protowire.Type, v []byte, n uint64) error {
				var err error
				switch num {
				case 1:
					c.importing.id = string(v)
				case 2:
					c.importing.unknown = n != 0
				case 3:
					c.importing.identity, err = dynamicValue(v)
				}
				return err
			})
		case 6:
			c.hasGenerated = len(v) > 0
		case 7:
			c.beforeIdentity, err = dynamicValue(v)
		case 8:
			c.afterIdentity, err = dynamicValue(v)
		}
		return err
	})
	return c, err
}

func decodePath(b []byte) (path, error) {
	var p path
	err := fields(b, func(num protowire.Number, _ protowire.Type, v []byte, _ uint64) error {
		if num != 1 {
			return nil
		}
		var s pathStep
		found := false
		err := fields(v, func(num protowire.Number, _ protowire.Type, v []byte, _ uint64) error {
			var err error
			switch num {
			case 1:
				s.attr, found = string(v), true
			case 2:
				s.key, err = dynamicValue(v)
				found = true
			}
			return err
		})
		if err == nil && !found {
			err = errors.New("a path step that is neither an attribute nor an element key")
		}
		p = append(p, s)
		return err
	})
	return p, err
}

// dynamicValue returns the msgpack bytes of a DynamicValue; terraform
// writes no other encoding.
func dynamicValue(b []byte) ([]byte, error) {
	var out []byte
	found := false
	err := fields(b, func(num protowire.Number, _ protowire.Type, v []byte, _ uint64) error {
		if num == 1 {
			out, found = v, true
		}
		return nil
	})
	if err == nil && !found {
		err = errors.New("a value in an encoding other than msgpack")
	}
	if out == nil {
		out = []byte{}
	}
	return out, err
}
