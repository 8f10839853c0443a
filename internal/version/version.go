// Package version tells which build of mqtarget is running: the version (set at link time), the VCS
// revision and the Go version, from the binary's embedded build information.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Version is the release name; the build overrides it with
// -ldflags "-X github.com/mqtarget/mqtarget/internal/version.Version=v1.2.3".
var Version = ""

// Revision is the VCS revision when the binary's build information has none: a build from a tree
// without .git (the Dockerfile's, whose context .dockerignore keeps .git out of) sets it with
// -ldflags "-X github.com/mqtarget/mqtarget/internal/version.Revision=$(git rev-parse HEAD)".
var Revision = ""

// Info identifies a build.
type Info struct {
	Version   string // Version, else the main module's version, else "devel"
	Revision  string // vcs.revision, with "-dirty" when vcs.modified; else Revision; else "unknown"
	GoVersion string
}

// Get reads the running binary's build information.
func Get() Info { return fromBuild(Version, Revision, debug.ReadBuildInfo) }

// fromBuild is Get with its inputs passed in, for tests.
func fromBuild(override, revision string, read func() (*debug.BuildInfo, bool)) Info {
	if revision == "" {
		revision = "unknown"
	}
	in := Info{Version: override, Revision: revision, GoVersion: runtime.Version()}
	bi, ok := read()
	if !ok {
		if in.Version == "" {
			in.Version = "devel"
		}
		return in
	}
	if bi.GoVersion != "" {
		in.GoVersion = bi.GoVersion
	}
	if in.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		in.Version = bi.Main.Version
	}
	if in.Version == "" {
		in.Version = "devel"
	}
	var vcs, modified bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			in.Revision, vcs = s.Value, true
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if modified && vcs {
		in.Revision += "-dirty"
	}
	return in
}

// String is the one line -version prints.
func (i Info) String() string {
	return fmt.Sprintf("mqtarget %s (revision %s, %s)", i.Version, i.Revision, i.GoVersion)
}
