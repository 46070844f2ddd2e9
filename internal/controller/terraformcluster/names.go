package terraformcluster

import (
	"crypto/sha256"
	"encoding/hex"
)

// kindShort is the short kind in the names of spec 004: captf-<what>-tfc-<name>.
const kindShort = "tfc"

// maxName is the longest Secret name (a DNS subdomain).
const maxName = 253

// shorten keeps a name within limit: a longer one becomes a prefix and 16
// hex characters of the SHA-256 of the whole name (spec 004).
func shorten(name string, limit int) string {
	if len(name) <= limit {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return name[:limit-17] + "-" + hex.EncodeToString(sum[:8])
}

func planKeyName(name string) string { return shorten("captf-plankey-"+kindShort+"-"+name, maxName) }
func inputsName(name string) string  { return shorten("captf-inputs-"+kindShort+"-"+name, maxName) }
func runName(job string) string      { return shorten("captf-run-"+job, maxName) }

// stateSuffix names the state Secret tfstate-default-<suffix> that
// terraform's kubernetes backend keeps.
func stateSuffix(name string) string { return "captf-" + kindShort + "-" + name }

func stateSecretName(name string) string { return "tfstate-default-" + stateSuffix(name) }

// planName names the TerraformPlan of a plan Job: deterministic per Job
// and hash, so a recurring identical plan from a later Job is a new object
// (spec 002).
func planName(name, job, hash string) string {
	sum := sha256.Sum256([]byte(job + "\n" + hash))
	return shorten(name, maxName-11) + "-" + hex.EncodeToString(sum[:5])
}

// maxLabel is the longest label value.
const maxLabel = 63

// labelValue keeps a name within a label value's limit: a longer one
// becomes a prefix and 16 hex characters of its hash, like a Secret name.
func labelValue(name string) string { return shorten(name, maxLabel) }
