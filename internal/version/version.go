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

// Info identifies a build.
type Info struct {
	Version   string // Version, else the main module's version, else "devel"
	Revision  string // vcs.revision, with "-dirty" when vcs.modified; "unknown" without VCS information
	GoVersion string
}

// Get reads the running binary's build information.
func Get() Info { return fromBuild(Version, debug.ReadBuildInfo) }

// fromBuild is Get with its inputs passed in, for tests.
func fromBuild(override string, read func() (*debug.BuildInfo, bool)) Info {
	in := Info{Version: override, Revision: "unknown", GoVersion: runtime.Version()}
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
	var modified bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			in.Revision = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if modified && in.Revision != "unknown" {
		in.Revision += "-dirty"
	}
	return in
}

// String is the one line -version prints.
func (i Info) String() string {
	return fmt.Sprintf("mqtarget %s (revision %s, %s)", i.Version, i.Revision, i.GoVersion)
}
