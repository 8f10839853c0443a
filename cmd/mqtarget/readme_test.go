package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/mqtarget/mqtarget/config"
	"github.com/mqtarget/mqtarget/handlers"
	"go.yaml.in/yaml/v3"
)

// The documentation checks live here, at the top of the import graph, where both the configuration keys
// and the endpoint table are in reach: users' scripts depend on these names.

func readme(t *testing.T) string {
	t.Helper()
	return doc(t, "README.md")
}

// doc returns a file of the repository by its path from the root.
func doc(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("../..", filepath.FromSlash(path)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// configRef is the configuration reference: one table row per key.
const configRef = "docs/configuration.md"

// keyRow is a row of a key table: its first cell is one key in backquotes.
var keyRow = regexp.MustCompile("(?m)^\\| `([a-z0-9_.]+)` \\|")

// TestConfigurationDocumentsEveryKey keeps the configuration reference complete and true: every key has
// a table row of its own (a mention in passing is no row), and every row is a key.
func TestConfigurationDocumentsEveryKey(t *testing.T) {
	rows := map[string]int{}
	for _, m := range keyRow.FindAllStringSubmatch(doc(t, configRef), -1) {
		rows[m[1]]++
	}
	keys := map[string]bool{}
	for _, k := range config.Keys() {
		keys[k[0]] = true
		if rows[k[0]] != 1 {
			t.Errorf("%s has %d table rows for the setting `%s`, want 1", configRef, rows[k[0]], k[0])
		}
	}
	for r := range rows {
		if !keys[r] {
			t.Errorf("%s has a row for `%s`, which is no setting (config.Keys)", configRef, r)
		}
	}
}

// TestConfigurationDefaults: each key's row gives the default config.Default() has, as
// -print-config prints it (`value`, a list comma-separated), or *(empty…)* for an empty value.
func TestConfigurationDefaults(t *testing.T) {
	text, err := config.Default().YAML()
	if err != nil {
		t.Fatal(err)
	}
	var tree map[string]any
	if err := yaml.Unmarshal(text, &tree); err != nil {
		t.Fatal(err)
	}
	defaults := map[string]string{}
	var flatten func(prefix string, v any)
	flatten = func(prefix string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, sub := range v {
				flatten(prefix+k+".", sub)
			}
		case []any:
			var items []string
			for _, it := range v {
				items = append(items, fmt.Sprint(it))
			}
			defaults[strings.TrimSuffix(prefix, ".")] = strings.Join(items, ",")
		case nil:
			defaults[strings.TrimSuffix(prefix, ".")] = ""
		default:
			defaults[strings.TrimSuffix(prefix, ".")] = fmt.Sprint(v)
		}
	}
	flatten("", tree)
	row := regexp.MustCompile("(?m)^\\| `([a-z0-9_.]+)` \\| ([^|]*) \\|")
	for _, m := range row.FindAllStringSubmatch(doc(t, configRef), -1) {
		key, cell := m[1], m[2]
		want, ok := defaults[key]
		if !ok {
			continue // TestConfigurationDocumentsEveryKey names it
		}
		switch {
		case strings.HasPrefix(cell, "*(empty"):
			if want != "" {
				t.Errorf("%s: `%s` documented as empty, default is %q", configRef, key, want)
			}
		case len(cell) > 1 && cell[0] == '`' && cell[len(cell)-1] == '`':
			if got := cell[1 : len(cell)-1]; got != want {
				t.Errorf("%s: `%s` documented with default %q, default is %q", configRef, key, got, want)
			}
		default:
			t.Errorf("%s: `%s`'s default cell %q is neither `value` nor *(empty…)*", configRef, key, cell)
		}
	}
}

// TestConfigurationNamesReservedEnv: the variables mqtarget lets through without a setting
// (config.ReservedEnv; a name ending in _ is a prefix, written MQTARGET_X_*) are listed where the
// reference says which MQTARGET_* variables are refused.
func TestConfigurationNamesReservedEnv(t *testing.T) {
	ref := doc(t, configRef)
	for _, name := range append([]string{config.EnvPrefix + "CONFIG"}, config.ReservedEnv...) {
		if strings.HasSuffix(name, "_") {
			name += "*"
		}
		if !strings.Contains(ref, "`"+name+"`") {
			t.Errorf("%s does not name the reserved variable `%s`", configRef, name)
		}
	}
}

// TestDocsListEveryEndpoint keeps the endpoint tables (README's short one and docs/endpoints.md's) and
// the handlers' endpoint table the same set: a route users cannot find is as bad as a documented one
// that does not exist.
func TestDocsListEveryEndpoint(t *testing.T) {
	for _, file := range []string{"README.md", "docs/endpoints.md"} {
		t.Run(file, func(t *testing.T) {
			section := doc(t, file)
			start := strings.Index(section, "\n## Endpoints\n")
			if start < 0 {
				t.Fatalf(`%s has no "## Endpoints" section`, file)
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
					t.Errorf("%s's Endpoints section has no table row for %s", file, e.Path)
				}
			}
			for _, p := range documented {
				if !slices.Contains(served, p) {
					t.Errorf("%s documents %s, which handlers.Endpoints() does not serve", file, p)
				}
			}
		})
	}
}

// urlRE finds what a shell would take as a URL argument: with a scheme (amqp:// too), or a loopback
// host:port/path.
var urlRE = regexp.MustCompile(`\b[a-z][a-z0-9+.-]*://[^\s'"]+|\b(?:localhost|127\.0\.0\.1|0\.0\.0\.0):\d+/[^\s'"]*`)

// TestDocsQuoteURLs: every URL in the shell blocks of README.md and docs/*.md is quoted, so a command
// copied into zsh does not fail on '?' as a glob ("no matches found") and '&' does not background half
// of it.
func TestDocsQuoteURLs(t *testing.T) {
	for _, file := range docFiles(t, "../..") {
		name, _ := filepath.Rel("../..", file)
		t.Run(name, func(t *testing.T) {
			var inBlock, inShell bool
			for i, line := range strings.Split(doc(t, name), "\n") {
				if fence, ok := strings.CutPrefix(strings.TrimSpace(line), "```"); ok {
					inBlock = !inBlock
					inShell = inBlock && (fence == "sh" || fence == "bash" || fence == "console" || fence == "")
					continue
				}
				if !inShell {
					continue
				}
				if c := strings.Index(" "+line, " #"); c >= 0 {
					line = line[:max(c-1, 0)] // a comment: the shell takes no URL from it
				}
				for _, loc := range urlRE.FindAllStringIndex(line, -1) {
					if loc[0] == 0 || (line[loc[0]-1] != '\'' && line[loc[0]-1] != '"') {
						t.Errorf("%s:%d: unquoted URL %s in a shell block: %s", name, i+1, line[loc[0]:loc[1]], line)
					}
				}
			}
		})
	}
}
