package preview_test

import (
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/captf/captf/internal/preview"
	"github.com/captf/captf/internal/preview/previewtest"
)

func TestKeyedDigest(t *testing.T) {
	value := map[string]any{"pw": "hunter22-secret"}
	base, err := preview.KeyedDigest(previewtest.Key(), "terraform-apply", value)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^hmac-sha256:[0-9a-f]{64}$`).MatchString(base) || strings.Contains(base, "hunter22") {
		t.Fatalf("digest %q is not hmac-sha256: and 64 hex digits, or holds the value", base)
	}
	cases := []struct {
		reason string
		key    []byte
		label  string
		value  any
		same   bool
	}{
		{"the same value, key and label", previewtest.Key(), "terraform-apply", map[string]any{"pw": "hunter22-secret"}, true},
		{"another value", previewtest.Key(), "terraform-apply", map[string]any{"pw": "hunter22-secreT"}, false},
		{"another key", previewtest.OtherKey(), "terraform-apply", value, false},
		{"a longer key", append(previewtest.Key(), 'x'), "terraform-apply", value, false},
		{"another label", previewtest.Key(), "cfn-deploy", value, false},
		{"an empty list", previewtest.Key(), "terraform-apply", []any{}, false},
	}
	for _, c := range cases {
		t.Run(c.reason, func(t *testing.T) {
			got, err := preview.KeyedDigest(c.key, c.label, c.value)
			if err != nil {
				t.Fatal(err)
			}
			if (got == base) != c.same {
				t.Errorf("digest %s against %s: same=%v, want same=%v", got, base, got == base, c.same)
			}
		})
	}
	for _, key := range [][]byte{nil, {}, previewtest.Key()[:31]} {
		if _, err := preview.KeyedDigest(key, "terraform-apply", value); !errors.Is(err, preview.ErrShortKey) {
			t.Errorf("a %d-byte key: %v, want ErrShortKey", len(key), err)
		}
	}
	if _, err := preview.KeyedDigest(previewtest.Key(), "x", func() {}); err == nil {
		t.Error("a value that is not JSON digested")
	}
}
