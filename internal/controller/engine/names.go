package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/captf/captf/internal/tfstate"
)

// MaxName is the longest Secret name (a DNS subdomain).
const MaxName = 253

// MaxLabel is the longest label value.
const MaxLabel = 63

// hashLen is how many hex characters of a hash a shortened name ends in.
const hashLen = 16

// shorten keeps a name within limit: a longer one becomes a prefix and 16
// hex characters of the SHA-256 of the whole name (spec 004). A prefix
// cut right after a dot loses the dot, since ".-" is in no DNS name.
func shorten(name string, limit int) string {
	if len(name) <= limit {
		return name
	}
	return strings.TrimRight(name[:limit-hashLen-1], ".") + "-" + nameHash(name)
}

// nameHash is 16 hex characters of the SHA-256 of name.
func nameHash(name string) string {
	sum := sha256.Sum256([]byte(name))
	return hex.EncodeToString(sum[:hashLen/2])
}

func PlanKeyName(short, name string) string { return shorten("captf-plankey-"+short+"-"+name, MaxName) }
func InputsName(short, name string) string  { return shorten("captf-inputs-"+short+"-"+name, MaxName) }
func RunName(job string) string             { return shorten("captf-run-"+job, MaxName) }

// CredentialsName is the per-run copy of a Job's credentials.
func CredentialsName(job string) string { return shorten("captf-cred-"+job, MaxName) }

// NameLabel is an object's name as a label value (captf.io/owner-name, or
// any label that carries the name): a name past 63 characters becomes a
// prefix and 16 hex characters of a hash, so the label no longer gives the
// name back; find the object by owner reference instead.
func NameLabel(name string) string { return shorten(name, MaxLabel) }

// StateSuffix is the secret_suffix of terraform's kubernetes backend for
// the object named name. The backend keeps the state in the Secret
// tfstate-default-<suffix> (a large state also in
// tfstate-default-<suffix>-part-<n>), locks it with the Lease
// lock-tfstate-default-<suffix>, labels both tfstateSecretSuffix=<suffix>,
// and (terraform 1.10 and later) refuses a suffix whose text after its
// last "-" is a number. So a suffix must be a label value of at most 63
// characters whose last "-" is not followed by digits only.
//
// It is captf-tfc-<name> whenever that is such a suffix, as it always was:
// the state of an object that could apply stays where it is. Otherwise (a
// name ending in -<digits>, or one longer than 53 characters) it is
// captf-tfc.<prefix>.<16 hex characters of the SHA-256 of the name>: the
// dot after "tfc" keeps the two forms apart, the one after the prefix
// keeps the end from being a number, and the prefix (at most 36
// characters of the name, without a trailing "." or "-") says whose state
// it is. It depends on the name only, never the UID, so the state is
// found again after a move.
func StateSuffix(short, name string) string {
	plain := "captf-" + short + "-" + name
	if len(plain) <= MaxLabel && !numberTail(plain) {
		return plain
	}
	head := "captf-" + short + "."
	prefix := name[:min(len(name), MaxLabel-len(head)-1-hashLen)]
	prefix = strings.TrimRight(prefix, ".-")
	return head + prefix + "." + nameHash(name)
}

// numberTail reports whether the text after the last "-" of s is digits
// only: terraform's kubernetes backend takes it for a chunk index.
func numberTail(s string) bool {
	i := strings.LastIndexByte(s, '-')
	if i < 0 || i == len(s)-1 {
		return false
	}
	return strings.Trim(s[i+1:], "0123456789") == ""
}

func StateSecretName(short, name string) string { return tfstate.SecretName(StateSuffix(short, name)) }

// PlanName names the TerraformPlan of a plan Job: deterministic per Job
// and hash, so a recurring identical plan from a later Job is a new object
// (spec 002).
func PlanName(name, job, hash string) string {
	sum := sha256.Sum256([]byte(job + "\n" + hash))
	return shorten(name, MaxName-11) + "-" + hex.EncodeToString(sum[:5])
}
