package deploy_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var (
	ldflagsRE = regexp.MustCompile(`-ldflags="([^"]*)"`)
	xFlagRE   = regexp.MustCompile(`-X (github\.com/mqtarget/mqtarget/internal/version)\.([A-Za-z]+)=\$\{([A-Z_]+)\}`)
	argRE     = regexp.MustCompile(`(?m)^ARG ([A-Z_]+)`)
)

// TestDockerfileRevision: .dockerignore keeps .git out of the build context, so the image's binary
// has no VCS information; the Dockerfile passes its VERSION and REVISION build args to
// internal/version with -ldflags -X, and labels the image with the same REVISION. The test builds
// mqtarget with the Dockerfile's own -ldflags and no VCS information, as docker build would, and reads
// `mqtarget version`: a -X naming a variable that does not exist is silently ignored by the linker.
func TestDockerfileRevision(t *testing.T) {
	raw, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	df := strings.ReplaceAll(string(raw), "\\\n", " ")
	ignore, err := os.ReadFile("../.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(strings.Fields(string(ignore)), ".git") {
		t.Log(".dockerignore no longer excludes .git; the Go toolchain may embed vcs.revision itself")
	}
	stages := strings.Split(df, "\nFROM ")
	if len(stages) < 3 {
		t.Fatalf("%d FROM lines, want a build stage and a final stage", len(stages)-1)
	}
	build, final := stages[1], stages[len(stages)-1]
	m := ldflagsRE.FindStringSubmatch(build)
	if m == nil {
		t.Fatal("the build stage's go build has no -ldflags=\"...\"")
	}
	ldflags := m[1]
	set := map[string]string{} // variable -> build arg
	for _, x := range xFlagRE.FindAllStringSubmatch(ldflags, -1) {
		set[x[2]] = x[3]
	}
	for _, v := range []string{"Version", "Revision"} {
		if set[v] == "" {
			t.Errorf("-ldflags %q set no internal/version.%s from a build arg", ldflags, v)
		}
	}
	declared := func(stage string) []string {
		var out []string
		for _, a := range argRE.FindAllStringSubmatch(stage, -1) {
			out = append(out, a[1])
		}
		return out
	}
	for v, arg := range set {
		// An ARG is empty inside a stage unless the stage declares it again.
		if !slices.Contains(declared(build), arg) || !slices.Contains(declared(stages[0]), arg) {
			t.Errorf("internal/version.%s comes from ${%s}, which the build stage or the top does not declare (ARG %s)", v, arg, arg)
		}
	}
	if !strings.Contains(final, `org.opencontainers.image.revision="${`+set["Revision"]+`}"`) ||
		!slices.Contains(declared(final), set["Revision"]) {
		t.Errorf("the image's revision label is not ${%s}, the build arg the binary gets", set["Revision"])
	}

	if testing.Short() {
		t.Skip("-short: not building mqtarget")
	}
	values := map[string]string{set["Version"]: "v0.0.0-dockerfile-test", set["Revision"]: "0123abcd-dockerfile-test"}
	flags := ldflags
	for arg, v := range values {
		flags = strings.ReplaceAll(flags, "${"+arg+"}", v)
	}
	out, err := exec.Command(buildMqtarget(t, flags), "version").CombinedOutput()
	if err != nil {
		t.Fatalf("mqtarget version: %v\n%s", err, out)
	}
	for _, v := range values {
		if !strings.Contains(string(out), v) {
			t.Errorf("mqtarget version printed %q, without %q", out, v)
		}
	}
}

// buildMqtarget builds cmd/mqtarget with ldflags and no VCS information (as in the image) and returns
// the binary's path.
func buildMqtarget(t *testing.T, ldflags string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "mqtarget")
	b := exec.Command("go", "build", "-buildvcs=false", "-ldflags="+ldflags, "-o", bin, "./cmd/mqtarget")
	b.Dir = ".."
	if out, err := b.CombinedOutput(); err != nil {
		t.Fatalf("go build -ldflags=%q: %v\n%s", ldflags, err, out)
	}
	return bin
}
