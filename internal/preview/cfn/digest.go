package cfn

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"

	"github.com/captf/captf/pkg/changeset"
)

// digests returns the member's plan digest (cfn1:) and its frame digest
// (cfnf1:). The frame is where and what the step deploys: the environment,
// the stack, the region, the endpoint input, the template's path and bytes,
// onReplace and the capabilities. The plan digest covers the frame, the
// given parameters and the missing inputs. Parameter values are hashed
// before they enter the digest, so that even what is hashed holds no value.
// The digest is public and unkeyed, so a NoEcho parameter enters it only
// as "sensitive"; sensitiveDigest binds its value within one command.
func digests(environment string, in inputs, region string, body []byte, missing []string, noEcho map[string]bool) (plan, frame string, err error) {
	sum := sha256.Sum256(body)
	capabilities := append([]string{}, in.Capabilities...)
	sort.Strings(capabilities)
	f := map[string]any{
		"environment":  environment,
		"stack":        in.Stack,
		"region":       region,
		"endpoint":     in.Endpoint,
		"template":     map[string]string{"path": in.Template, "sha256": hex.EncodeToString(sum[:])},
		"onReplace":    in.OnReplace,
		"capabilities": capabilities,
	}
	params := map[string]string{}
	for k, v := range in.Parameters {
		if noEcho[k] {
			params[k] = "sensitive"
			continue
		}
		h := sha256.Sum256([]byte(v))
		params[k] = hex.EncodeToString(h[:])
	}
	if missing == nil {
		missing = []string{}
	}
	plan, err = changeset.Digest("cfn1:", map[string]any{"frame": f, "parameters": params, "missing": missing})
	if err != nil {
		return "", "", err
	}
	frame, err = changeset.Digest("cfnf1:", f)
	if err != nil {
		return "", "", err
	}
	return plan, frame, nil
}

// newKey is a random key that lives only in memory, in Plan.Private.
func newKey() ([]byte, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("plan key: %w", err)
	}
	return key, nil
}

// sensitiveDigest is the HMAC under key of the values of the given NoEcho
// parameters, by name.
func sensitiveDigest(key []byte, params map[string]string, noEcho map[string]bool) (string, error) {
	values := map[string]string{}
	for k, v := range params {
		if noEcho[k] {
			values[k] = v
		}
	}
	b, err := changeset.Canonical(values)
	if err != nil {
		return "", err
	}
	mac := hmac.New(sha256.New, key)
	mac.Write(b)
	return hex.EncodeToString(mac.Sum(nil)), nil
}
