package arm

import (
	"regexp"
	"strings"
	"testing"
)

// TestIsGroupName: the function accepts exactly what the pattern ARM
// documents accepts.
func TestIsGroupName(t *testing.T) {
	pattern := regexp.MustCompile(`^[\p{L}\p{N}_\-.()]{1,90}$`)
	for _, name := range []string{
		"", "rg-web", "rg_web.(1)", "rg.", "rg web", "rg/web", "Ünïcødé-組", "٣٤", "Ⅻ", "rg\xff", "rg\u00a0",
		strings.Repeat("a", 90), strings.Repeat("a", 91), strings.Repeat("組", 90), strings.Repeat("組", 91),
	} {
		want := pattern.MatchString(name) && !strings.HasSuffix(name, ".")
		if got := isGroupName(name); got != want {
			t.Errorf("isGroupName(%q) = %v, want %v", name, got, want)
		}
	}
}
