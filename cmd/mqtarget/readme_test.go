package main

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/mqtarget/mqtarget/config"
	"github.com/mqtarget/mqtarget/handlers"
)

// The README checks live here, at the top of the import graph, where both the configuration keys and
// the endpoint table are in reach: users' scripts depend on these names.

func readme(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestREADMEDocumentsEveryKey keeps the configuration reference in README.md complete.
func TestREADMEDocumentsEveryKey(t *testing.T) {
	doc := readme(t)
	for _, k := range config.Keys() {
		if !strings.Contains(doc, "`"+k[0]+"`") {
			t.Errorf("README.md does not document the setting `%s`", k[0])
		}
	}
}

// TestREADMEListsEveryEndpoint keeps README's endpoint tables and the handlers' endpoint table the same
// set: a route users cannot find is as bad as a documented one that does not exist.
func TestREADMEListsEveryEndpoint(t *testing.T) {
	section := readme(t)
	start := strings.Index(section, "\n## Endpoints\n")
	if start < 0 {
		t.Fatal(`README.md has no "## Endpoints" section`)
	}
	section = section[start+1:]
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	row := regexp.MustCompile("(?m)^\\| `(/[^`]*)` \\|")
	var documented []string
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		documented = append(documented, m[1])
	}
	var served []string
	for _, e := range handlers.Endpoints() {
		served = append(served, e.Path)
		if !slices.Contains(documented, e.Path) {
			t.Errorf("README.md's Endpoints section has no table row for %s", e.Path)
		}
	}
	for _, p := range documented {
		if !slices.Contains(served, p) {
			t.Errorf("README.md documents %s, which handlers.Endpoints() does not serve", p)
		}
	}
}

// urlRE finds what a shell would take as a URL argument: with a scheme, or a loopback host:port/path.
var urlRE = regexp.MustCompile(`https?://[^\s'"]+|\b(?:localhost|127\.0\.0\.1|0\.0\.0\.0):\d+/[^\s'"]*`)

// TestREADMEQuotesURLs: every URL in README's shell blocks is quoted, so a command copied into zsh
// does not fail on '?' as a glob ("no matches found") and '&' does not background half of it.
func TestREADMEQuotesURLs(t *testing.T) {
	var inBlock, inShell bool
	for i, line := range strings.Split(readme(t), "\n") {
		if fence, ok := strings.CutPrefix(strings.TrimSpace(line), "```"); ok {
			inBlock = !inBlock
			inShell = inBlock && (fence == "sh" || fence == "bash" || fence == "console" || fence == "")
			continue
		}
		if !inShell {
			continue
		}
		for _, loc := range urlRE.FindAllStringIndex(line, -1) {
			if loc[0] == 0 || (line[loc[0]-1] != '\'' && line[loc[0]-1] != '"') {
				t.Errorf("README.md:%d: unquoted URL %s in a shell block: %s", i+1, line[loc[0]:loc[1]], line)
			}
		}
	}
}
