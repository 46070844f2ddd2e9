// Package version says which captf a binary is: the version a release
// stamps in at link time, else what the Go toolchain recorded in the
// binary's build information.
package version

import (
	"fmt"
	"runtime/debug"
)

// Stamp is the version a release build sets with
//
//	-ldflags "-X github.com/captf/captf/internal/version.Stamp=v0.1.0"
//
// Empty in any other build.
var Stamp string

// StampVariable is the linker's name of Stamp, for -ldflags -X.
const StampVariable = "github.com/captf/captf/internal/version.Stamp"

// devel is what the toolchain records as the main module's version when
// it was not built from a module download (a checkout, go run, go test).
const devel = "(devel)"

// Get returns the binary's version: Stamp when set, else "devel+" and the
// commit the toolchain recorded for a build from a git checkout ("-dirty"
// when the tree was modified), else the main module's version (set by go
// install module@version), else "devel".
func Get() string {
	info, _ := debug.ReadBuildInfo()
	return from(Stamp, info)
}

// from is Get with the stamp and build information given.
func from(stamp string, info *debug.BuildInfo) string {
	if stamp != "" {
		return stamp
	}
	if info == nil {
		return "devel"
	}
	var revision, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	// A checkout build records its commit, and since Go 1.24 also a main
	// module version made from it (v0.0.0-<time>-<commit>, "+dirty"). That
	// one reads like a release that go install could fetch, so the commit
	// is said instead. A module download (go install module@version)
	// records no commit.
	if revision == "" {
		if v := info.Main.Version; v != "" && v != devel {
			return v
		}
		return "devel"
	}
	if len(revision) > 12 {
		revision = revision[:12]
	}
	if modified == "true" {
		return "devel+" + revision + "-dirty"
	}
	return "devel+" + revision
}

// Line is what --version prints for the binary name: "name version v0.1.0",
// as cobra prints it.
func Line(name string) string {
	return fmt.Sprintf("%s version %s\n", name, Get())
}
