package preview

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/captf/captf/pkg/changeset"
	"github.com/captf/captf/pkg/fingerprint"
)

// MinKeySize is the shortest preview key accepted, in bytes: the length
// the core's plan key needs.
const MinKeySize = fingerprint.MinKeySize

// ErrShortKey says a preview key is missing or shorter than MinKeySize.
// Without one a capability cannot bind sensitive values, so it plans
// nothing.
var ErrShortKey = errors.New("no preview key")

// CheckKey refuses a key shorter than MinKeySize.
func CheckKey(key []byte) error {
	if len(key) < MinKeySize {
		return fmt.Errorf("%w: the key holds %d bytes; at least %d are needed", ErrShortKey, len(key), MinKeySize)
	}
	return nil
}

// SealedPrefix starts every value KeyedDigest returns.
const SealedPrefix = "hmac-sha256:"

// KeyedDigest binds sensitive values into a member's digest without
// revealing them: the hex HMAC-SHA256, under the preview key, of label and
// the canonical JSON (changeset.Canonical) of v. Without the key nobody can
// test a guess of a value against it; with another key it differs. label
// names the capability, so that one key's digests of two capabilities
// never collide. A key shorter than MinKeySize is refused.
func KeyedDigest(key []byte, label string, v any) (string, error) {
	if err := CheckKey(key); err != nil {
		return "", err
	}
	b, err := changeset.Canonical(v)
	if err != nil {
		return "", fmt.Errorf("sensitive values: %w", err)
	}
	mac := hmac.New(sha256.New, key)
	// The label ends at the first NUL: no label holds one, so no label and
	// value pair reads as another.
	mac.Write([]byte("captf preview sensitive values\x00" + label + "\x00"))
	mac.Write(b)
	return SealedPrefix + hex.EncodeToString(mac.Sum(nil)), nil
}
