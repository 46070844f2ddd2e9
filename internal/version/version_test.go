package version

import (
	"runtime/debug"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFrom(t *testing.T) {
	rev := "0123456789abcdef0123456789abcdef01234567"
	for _, tc := range []struct {
		reason string
		stamp  string
		info   *debug.BuildInfo
		want   string
	}{
		{"a stamp wins over everything", "v0.1.0", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.9"}}, "v0.1.0"},
		{"go install module@version records the module version", "", &debug.BuildInfo{Main: debug.Module{Version: "v0.2.0"}}, "v0.2.0"},
		{"a checkout build names its revision", "", &debug.BuildInfo{Main: debug.Module{Version: devel},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: "false"}}}, "devel+0123456789ab"},
		{"uncommitted changes say so", "", &debug.BuildInfo{Main: debug.Module{Version: devel},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: "true"}}}, "devel+0123456789ab-dirty"},
		{"Go 1.24+ also makes a pseudo-version of the commit: the commit is said", "", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261202100333-0123456789ab"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: "false"}}}, "devel+0123456789ab"},
		{"a pseudo-version of a modified tree", "", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261202100333-0123456789ab+dirty"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: "true"}}}, "devel+0123456789ab-dirty"},
		{"a checkout at a tag is still a checkout build", "", &debug.BuildInfo{Main: debug.Module{Version: "v0.3.0"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: "false"}}}, "devel+0123456789ab"},
		{"a revision without vcs.modified", "", &debug.BuildInfo{Main: debug.Module{Version: devel},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: rev}}}, "devel+0123456789ab"},
		{"no VCS information (go test, -buildvcs=false, a linked git worktree)", "", &debug.BuildInfo{Main: debug.Module{Version: devel}}, "devel"},
		{"no build information at all", "", nil, "devel"},
	} {
		t.Run(tc.reason, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, from(tc.stamp, tc.info)); diff != "" {
				t.Errorf("from() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestGetUsesTheStamp(t *testing.T) {
	defer func(s string) { Stamp = s }(Stamp)
	Stamp = "v9.9.9"
	if diff := cmp.Diff("captf version v9.9.9\n", Line("captf")); diff != "" {
		t.Errorf("Line (-want +got):\n%s", diff)
	}
}
