package serve

import "runtime/debug"

// moduleVersion is the version of module path linked into this binary ("" when unknown): the version
// of an embedded broker, which GET / shows so that load results can say which broker they measured.
func moduleVersion(path string) string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, m := range bi.Deps {
		if m.Path == path {
			if m.Replace != nil {
				return m.Replace.Version
			}
			return m.Version
		}
	}
	return ""
}
