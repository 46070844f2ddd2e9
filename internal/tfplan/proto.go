package tfplan

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"google.golang.org/protobuf/encoding/protowire"
)

// The messages of terraform's tfplan file (internal/plans/planproto,
// planfile.proto, format version 3) that the plan document needs, read
// with protowire: the field numbers below are that file's, and OpenTofu's
// where it differs (the import's identity, an action of its own).

type resourceChange struct {
	addr, prevRunAddr, deposedKey, provider string
	change                                  change
}

type outputChange struct {
	name      string
	change    change
	sensitive bool
}

// change is what the document needs of a Change: not the generated
// configuration nor the identities before and after, which show writes
// but the fingerprint does not read.
type change struct {
	action                uint64
	values                [][]byte
	beforeSens, afterSens []path
	importing             *importing
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

// maxFieldBytes bounds one top-level field of the plan: a resource
// change, an output change, a variable.
const maxFieldBytes = 256 << 20

// topFields reads the fields of the Plan message from r one at a time,
// as terraform writes them (in the order of their numbers), and calls f
// with each: a resource change is read, rendered and let go before the
// next, so the plan is never whole in memory. A bytes field's value is
// valid only during the call.
func topFields(r *bufio.Reader, f func(num protowire.Number, typ protowire.Type, v []byte, n uint64) error) error {
	var buf []byte
	for {
		tag, err := binary.ReadUvarint(r)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		num, typ := protowire.DecodeTag(tag)
		if !num.IsValid() {
			return errors.New("an invalid field number")
		}
		var v []byte
		var n uint64
		switch typ {
		case protowire.VarintType:
			n, err = binary.ReadUvarint(r)
		case protowire.BytesType:
			var l uint64
			if l, err = binary.ReadUvarint(r); err == nil {
				if l > maxFieldBytes {
					return fmt.Errorf("a field of %d bytes", l)
				}
				if uint64(cap(buf)) < l {
					buf = make([]byte, l)
				}
				v = buf[:l]
				_, err = io.ReadFull(r, v)
			}
		case protowire.Fixed32Type:
			_, err = r.Discard(4)
		case protowire.Fixed64Type:
			_, err = r.Discard(8)
		default:
			return fmt.Errorf("a field of wire type %d", typ)
		}
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		if err != nil {
			return err
		}
		if err := f(num, typ, v, n); err != nil {
			return err
		}
	}
}

// decodeVariable reads a variables map entry.
func decodeVariable(b []byte) (name string, value []byte, err error) {
	err = fields(b, func(num protowire.Number, _ protowire.Type, v []byte, _ uint64) error {
		switch num {
		case 1:
			name = string(v)
		case 2:
			var err error
			value, err = dynamicValue(v)
			return err
		}
		return nil
	})
	return name, value, err
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
			err = fields(v, func(num protowire.Number, typ protowire.Type, v []byte, n uint64) error {
				var err error
				switch {
				case num == 1:
					c.importing.id = string(v)
				case num == 2 && typ == protowire.VarintType:
					// terraform: the id is unknown.
					c.importing.unknown = n != 0
				case num == 3, num == 2 && typ == protowire.BytesType:
					// The identity: terraform's field 3, tofu's 2.
					c.importing.identity, err = dynamicValue(v)
				}
				return err
			})
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
