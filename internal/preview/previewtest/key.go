package previewtest

import (
	"encoding/base64"
	"encoding/hex"
)

// Key is a preview key for tests: 32 bytes, a fresh slice each call.
func Key() []byte { return []byte("captf-preview-test-key-000000001") }

// OtherKey is a second preview key for tests, other than Key.
func OtherKey() []byte { return []byte("captf-preview-test-key-000000002") }

// KeyForms are the texts a key could show up as in what a capability
// returns: its bytes, their hex and their base64. A test looks for each.
func KeyForms(key []byte) []string {
	return []string{
		string(key),
		hex.EncodeToString(key),
		base64.StdEncoding.EncodeToString(key),
		base64.RawURLEncoding.EncodeToString(key),
	}
}
