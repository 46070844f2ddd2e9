package testprovider

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestSplitID: an id names one file under the root, and every id the
// provider writes reads back to the same directory and name.
func TestSplitID(t *testing.T) {
	type want struct{ Dir, Name, Err string }
	for _, tc := range []struct {
		reason, id string
		want       want
	}{
		{"a file in the root", "a.txt", want{Dir: ".", Name: "a.txt"}},
		{"a file in a directory", "d/a.txt", want{Dir: "d", Name: "a.txt"}},
		{"nested directories", "d/e/a.txt", want{Dir: "d/e", Name: "a.txt"}},
		{"empty", "", want{Err: `name "" is not a file name`}},
		{"a trailing slash", "d/", want{Err: `name "" is not a file name`}},
		{"absolute", "/etc/passwd", want{Err: `directory "/etc" is absolute: give it relative to the root`}},
		{"outside the root", "../a.txt", want{Err: `directory ".." leaves the root`}},
		{"unclean", "d//a.txt", want{Err: `directory "d/" is not clean: write "d"`}},
		{"unclean dot", "./a.txt", want{Err: `id "./a.txt" is not clean: write "a.txt"`}},
		{"a secret's file", "d/.a.txt.captftest-secret", want{Err: `name ".a.txt.captftest-secret" ends in .captftest-secret, kept for secrets`}},
	} {
		t.Run(tc.reason, func(t *testing.T) {
			var got want
			dir, name, err := splitID(tc.id)
			if err != nil {
				got.Err = err.Error()
			} else {
				got.Dir, got.Name = dir, name
				if back := id(dir, name); back != tc.id {
					t.Errorf("id(%q, %q) = %q, want %q", dir, name, back, tc.id)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("splitID(%q) (-want +got):\n%s", tc.id, diff)
			}
		})
	}
}

func TestParseMode(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want uint32
		err  bool
	}{
		{"0644", 0o644, false},
		{"0600", 0o600, false},
		{"0755", 0o755, false},
		{"644", 0, true},
		{"0648", 0, true},
		{"1644", 0, true},
		{"", 0, true},
	} {
		got, err := parseMode(tc.in)
		if (err != nil) != tc.err || uint32(got) != tc.want {
			t.Errorf("parseMode(%q) = %04o, %v; want %04o, error %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}
