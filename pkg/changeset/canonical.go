package changeset

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"unicode/utf8"
)

// errInvalidUTF8: encoding/json writes every byte that is not UTF-8 as
// U+FFFD, so "a\xff" and "a\xfe" would digest alike; such a string is
// refused instead.
var errInvalidUTF8 = errors.New("not valid UTF-8")

// Canonical returns the canonical JSON of v: object keys sorted, no
// insignificant space, no HTML escaping, numbers kept as written (values
// that hold json.RawMessage or json.Number keep their literal text). A
// string that is not valid UTF-8 is an error, never merged with another.
func Canonical(v any) ([]byte, error) {
	if err := checkUTF8(reflect.ValueOf(v), "$"); err != nil {
		return nil, fmt.Errorf("canonical json: %w", err)
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("canonical json: %w", err)
	}
	if !utf8.Valid(raw) {
		// Raw JSON (json.RawMessage) is copied as it is, bytes and all.
		return nil, fmt.Errorf("canonical json: raw JSON %w", errInvalidUTF8)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		return nil, fmt.Errorf("canonical json: %w", err)
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(tree); err != nil {
		return nil, fmt.Errorf("canonical json: %w", err)
	}
	return bytes.TrimSuffix(out.Bytes(), []byte("\n")), nil
}

// Digest returns prefix followed by the hex SHA-256 of the canonical JSON
// of v, e.g. Digest("tf1:", changes).
func Digest(prefix string, v any) (string, error) {
	b, err := Canonical(v)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return prefix + hex.EncodeToString(sum[:]), nil
}

// checkUTF8 finds a Go string under v that is not valid UTF-8 and names
// where it is (field and key names, never the value). Byte slices are
// left to the caller: encoding/json writes them as base64, and raw JSON
// is checked once marshalled.
func checkUTF8(v reflect.Value, at string) error {
	switch v.Kind() {
	case reflect.String:
		if !utf8.ValidString(v.String()) {
			return fmt.Errorf("the string at %s is %w", at, errInvalidUTF8)
		}
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			return checkUTF8(v.Elem(), at)
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if !f.IsExported() || name == "-" {
				continue
			}
			if name == "" {
				name = f.Name
			}
			if err := checkUTF8(v.Field(i), at+"."+name); err != nil {
				return err
			}
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			k := it.Key()
			if k.Kind() == reflect.String && !utf8.ValidString(k.String()) {
				return fmt.Errorf("a key under %s is %w", at, errInvalidUTF8)
			}
			if err := checkUTF8(it.Value(), fmt.Sprintf("%s[%q]", at, k)); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return nil
		}
		for i := range v.Len() {
			if err := checkUTF8(v.Index(i), fmt.Sprintf("%s[%d]", at, i)); err != nil {
				return err
			}
		}
	}
	return nil
}
