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
		bi       *debug.BuildInfo
		want     Info
	}{
		{"ldflags override wins", "v1.2.3", withVCS, Info{"v1.2.3", "abc123", "go1.26.8"}},
		{"devel module without override", "", withVCS, Info{"devel", "abc123", "go1.26.8"}},
		{"module version and modified tree", "", dirty, Info{"v0.3.0", "abc123-dirty", "go1.26.8"}},
		{"no VCS settings", "", &debug.BuildInfo{GoVersion: "go1.26.8"}, Info{"devel", "unknown", "go1.26.8"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := fromBuild(tc.override, func() (*debug.BuildInfo, bool) { return tc.bi, true })
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
	t.Run("no build info", func(t *testing.T) {
		got := fromBuild("", func() (*debug.BuildInfo, bool) { return nil, false })
		if got.Version != "devel" || got.Revision != "unknown" || got.GoVersion == "" {
			t.Errorf("got %+v", got)
		}
	})
}
