package version

import (
	"runtime/debug"
	"testing"
)

func TestFromBuild(t *testing.T) {
	withVCS := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "false"},
	}}
	dirty := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.3.0"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "true"},
	}}
	for _, tc := range []struct {
		name     string
		override string
		revision string // -X ...Revision, as the Dockerfile sets it from its REVISION build arg
		bi       *debug.BuildInfo
		want     Info
	}{
		{"ldflags override wins", "v1.2.3", "", withVCS, Info{"v1.2.3", "abc123", "go1.26.8"}},
		{"devel module without override", "", "", withVCS, Info{"devel", "abc123", "go1.26.8"}},
		{"module version and modified tree", "", "", dirty, Info{"v0.3.0", "abc123-dirty", "go1.26.8"}},
		{"no VCS settings", "", "", &debug.BuildInfo{GoVersion: "go1.26.8"}, Info{"devel", "unknown", "go1.26.8"}},
		{"no VCS settings, revision from the build", "v1.2.3", "def456", &debug.BuildInfo{GoVersion: "go1.26.8"}, Info{"v1.2.3", "def456", "go1.26.8"}},
		{"VCS settings win over the build's revision", "", "def456", withVCS, Info{"devel", "abc123", "go1.26.8"}},
		{"modified flag without a VCS revision adds nothing", "", "def456", &debug.BuildInfo{GoVersion: "go1.26.8", Settings: []debug.BuildSetting{{Key: "vcs.modified", Value: "true"}}}, Info{"devel", "def456", "go1.26.8"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := fromBuild(tc.override, tc.revision, func() (*debug.BuildInfo, bool) { return tc.bi, true })
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
	t.Run("no build info", func(t *testing.T) {
		got := fromBuild("", "", func() (*debug.BuildInfo, bool) { return nil, false })
		if got.Version != "devel" || got.Revision != "unknown" || got.GoVersion == "" {
			t.Errorf("got %+v", got)
		}
		if got := fromBuild("", "def456", func() (*debug.BuildInfo, bool) { return nil, false }); got.Revision != "def456" {
			t.Errorf("without build info, Revision %q: got %+v", "def456", got)
		}
	})
}
