package cfn

import (
	"crypto/sha256"
	"encoding/hex"
	"sort"

	"github.com/captf/captf/internal/preview"
	"github.com/captf/captf/pkg/changeset"
)

// digests returns the member's plan digest (cfn1:) and its frame digest
// (cfnf1:). The frame is where and what the step deploys: the environment,
// the stack, the region, the endpoint input, the template's path and bytes,
// onReplace and the capabilities. The plan digest covers the frame, the
// given parameters and the missing inputs. Parameter values are hashed
// before they enter the digest, so that even what is hashed holds no value.
// A NoEcho parameter enters only as "sensitive": its value is bound by the
// keyed digest (preview.KeyedDigest) of every NoEcho value under key, which
// nobody can test a guess against without the key.
func digests(environment string, in inputs, region string, body []byte, missing []string, noEcho map[string]bool, key []byte) (plan, frame string, err error) {
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
	hidden := map[string]string{}
	for k, v := range in.Parameters {
		if noEcho[k] {
			params[k] = "sensitive"
			hidden[k] = v
			continue
		}
		h := sha256.Sum256([]byte(v))
		params[k] = hex.EncodeToString(h[:])
	}
	sensitive, err := preview.KeyedDigest(key, Kind, hidden)
	if err != nil {
		return "", "", err
	}
	if missing == nil {
		missing = []string{}
	}
	plan, err = changeset.Digest("cfn1:", map[string]any{"frame": f, "parameters": params, "missing": missing, "sensitive": sensitive})
	if err != nil {
		return "", "", err
	}
	frame, err = changeset.Digest("cfnf1:", f)
	if err != nil {
		return "", "", err
	}
	return plan, frame, nil
}
