package render

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
)

// DigestPrefix starts every RunDigest.
const DigestPrefix = "r1:"

// RunDigest is the keyed digest of the exact files a runner Job stages,
// main.tf.json and terraform.tfvars.json. The manager puts it in the Job's
// arguments, which only it writes; the runner, which holds the key, checks
// that the files it runs are those, not a copy someone edited in the
// per-run Secret. Keyed, it reveals nothing about the values in the files.
func RunDigest(key, mainTF, vars []byte) string {
	mac := hmac.New(sha256.New, key)
	for _, part := range [][]byte{[]byte("captf run inputs r1"), mainTF, vars} {
		fmt.Fprintf(mac, "%d:", len(part))
		mac.Write(part)
	}
	return DigestPrefix + hex.EncodeToString(mac.Sum(nil))
}

// CheckRunDigest reports whether digest is RunDigest of the files, in
// constant time.
func CheckRunDigest(key, mainTF, vars []byte, digest string) bool {
	return hmac.Equal([]byte(RunDigest(key, mainTF, vars)), []byte(digest))
}

// Differences names what differs between two rendered input sets, a and b
// (each its main.tf.json and terraform.tfvars.json): Root is set when the
// root modules differ in more than the inputs hash they record (the output
// HashOutput, which differs whenever any hashed value does); Variables are
// the names of the variables whose values differ, or that only one of
// them has, sorted. Nothing of a value is kept.
type Differences struct {
	Root      bool
	Variables []string
}

// Compare compares two rendered input sets (Differences).
func Compare(aMain, aVars, bMain, bVars []byte) (Differences, error) {
	var d Differences
	aRoot, err := rootWithoutHash(aMain)
	if err != nil {
		return d, err
	}
	bRoot, err := rootWithoutHash(bMain)
	if err != nil {
		return d, err
	}
	d.Root = !bytes.Equal(aRoot, bRoot)
	av, err := variableValues(aVars)
	if err != nil {
		return d, err
	}
	bv, err := variableValues(bVars)
	if err != nil {
		return d, err
	}
	for _, n := range slices.Sorted(maps.Keys(av)) {
		if w, ok := bv[n]; !ok || !bytes.Equal(av[n], w) {
			d.Variables = append(d.Variables, n)
		}
	}
	for _, n := range slices.Sorted(maps.Keys(bv)) {
		if _, ok := av[n]; !ok {
			d.Variables = append(d.Variables, n)
		}
	}
	slices.Sort(d.Variables)
	return d, nil
}

// rootWithoutHash is a rendered main.tf.json in canonical form without its
// output HashOutput.
func rootWithoutHash(mainTF []byte) ([]byte, error) {
	v, err := canonical(mainTF)
	if err != nil {
		return nil, fmt.Errorf("root module: %w", err)
	}
	root, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("root module: not a JSON object")
	}
	if outputs, ok := root["output"].(map[string]any); ok {
		delete(outputs, HashOutput)
	}
	return marshal(root)
}

// variableValues are the variables of a terraform.tfvars.json, each value
// in canonical form.
func variableValues(vars []byte) (map[string][]byte, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(vars, &raw); err != nil {
		return nil, fmt.Errorf("variables: %w", err)
	}
	out := make(map[string][]byte, len(raw))
	for n, r := range raw {
		v, err := canonical(r)
		if err != nil {
			return nil, fmt.Errorf("variables: %s: %w", n, err)
		}
		if out[n], err = marshal(v); err != nil {
			return nil, err
		}
	}
	return out, nil
}
