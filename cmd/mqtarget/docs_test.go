package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// The documentation's checks: README.md is the front door (short), and every relative link of README.md
// and docs/*.md leads somewhere: a file or directory that exists and, for a #anchor into a markdown
// file, a heading of that file (GitHub's slugs) or an HTML anchor in it.

// frontDoorLines is README.md's budget (issue #20 item 4): what the rest of the docs are for.
const frontDoorLines = 250

func TestREADMEIsAFrontDoor(t *testing.T) {
	n := strings.Count(strings.TrimRight(readme(t), "\n"), "\n") + 1
	if n > frontDoorLines {
		t.Errorf("README.md has %d lines, more than %d: move the detail to its page in docs/", n, frontDoorLines)
	}
}

// docFiles are the files whose links are checked, relative to the repository root.
func docFiles(t *testing.T, root string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{filepath.Join(root, "README.md")}, files...)
	if _, err := os.Stat(files[0]); err != nil {
		t.Fatal(err)
	}
	return files
}

func TestDocLinks(t *testing.T) {
	files := docFiles(t, "../..")
	if len(files) < 10 {
		t.Fatalf("only %d documentation files found: %v", len(files), files)
	}
	for _, p := range checkLinks("../..", files) {
		t.Error(p)
	}
}

// TestDocLinksCatchBroken runs the checker on small trees with one defect each (and on the cases
// that are no defect), so TestDocLinks cannot pass by checking nothing.
func TestDocLinksCatchBroken(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string // path → content; the first file checked is README.md
		want  string            // a substring of the one problem expected; "" for none
	}{
		{"missing file", map[string]string{"README.md": "see [x](docs/nope.md)\n"}, "docs/nope.md: no such file"},
		{"missing anchor", map[string]string{"README.md": "[x](docs/a.md#nope)\n", "docs/a.md": "# A\n## Yes\n"}, `no heading "nope"`},
		{"anchor into the same file", map[string]string{"README.md": "# T\n## Shut down\n[x](#shutdown)\n"}, `no heading "shutdown"`},
		{"link up from docs", map[string]string{"README.md": "# R\n", "docs/a.md": "[x](../deploy/)\n"}, "deploy/: no such file"},
		{"heading only in a code block", map[string]string{"README.md": "[x](docs/a.md#mqtarget01)\n", "docs/a.md": "# A\n```\n# mqtarget:0:1\n```\n"}, `no heading "mqtarget01"`},
		{"image", map[string]string{"README.md": "![shot](docs/live.png)\n"}, "docs/live.png: no such file"},
		{"link text in code", map[string]string{"README.md": "[`x`](docs/gone.md)\n"}, "docs/gone.md: no such file"},
		{"second heading of the same name", map[string]string{"README.md": "# R\n## Tests\n[x](#tests-2)\n"}, `no heading "tests-2"`},

		{"good file and anchor", map[string]string{"README.md": "[x](docs/a.md#replies-and-status-codes)\n", "docs/a.md": "# A\n### Replies and status codes\n"}, ""},
		{"punctuation and code in a heading", map[string]string{"README.md": "[x](docs/a.md#the-batch-experiment-mqtarget-roundtrip) [y](docs/a.md#stomp-activemq-artemis-rabbitmq)\n", "docs/a.md": "## The batch experiment: `mqtarget roundtrip`\n## STOMP (ActiveMQ Artemis, RabbitMQ)\n"}, ""},
		{"duplicate headings numbered", map[string]string{"README.md": "# R\n## Tests\n## Tests\n[x](#tests-1)\n"}, ""},
		{"html anchor", map[string]string{"README.md": "<a id=\"old-name\"></a>\n[x](#old-name)\n"}, ""},
		{"external and mail links skipped", map[string]string{"README.md": "[x](https://example.com/nope) [y](mailto:a@b)\n"}, ""},
		{"directory", map[string]string{"README.md": "[x](docs/)\n", "docs/a.md": "# A\n"}, ""},
		{"links inside code are not links", map[string]string{"README.md": "`[x](nope.md)`\n```\n[y](nope.md)\n```\n"}, ""},
		{"anchor into a non-markdown file", map[string]string{"README.md": "[x](main.go#L3)\n", "main.go": "package main\n"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			for p, text := range tc.files {
				full := filepath.Join(root, filepath.FromSlash(p))
				if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(full, []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got := checkLinks(root, docFiles(t, root))
			switch {
			case tc.want == "" && len(got) != 0:
				t.Errorf("problems %q, want none", got)
			case tc.want != "" && (len(got) != 1 || !strings.Contains(got[0], tc.want)):
				t.Errorf("problems %q, want one with %q", got, tc.want)
			}
		})
	}
}

func TestSlug(t *testing.T) {
	for _, tc := range []struct{ heading, want string }{
		{"Endpoints", "endpoints"},
		{"Replies and status codes", "replies-and-status-codes"},
		{"The batch experiment: `mqtarget roundtrip`", "the-batch-experiment-mqtarget-roundtrip"},
		{"Warm-up, ramps, shards, and the highest rate that meets a goal", "warm-up-ramps-shards-and-the-highest-rate-that-meets-a-goal"},
		{"Kafka, NATS JetStream, AMQP 0-9-1 (RabbitMQ), MQTT", "kafka-nats-jetstream-amqp-0-9-1-rabbitmq-mqtt"},
		{"Health check: `mqtarget healthcheck`", "health-check-mqtarget-healthcheck"},
		{"Threads 1–16, 100 B", "threads-116-100-b"},
		{"**kill -9** and [links](x.md)", "kill--9-and-links"},
		{"snake_case stays", "snake_case-stays"},
	} {
		t.Run(tc.heading, func(t *testing.T) {
			if got := slug(tc.heading); got != tc.want {
				t.Errorf("slug(%q) = %q, want %q", tc.heading, got, tc.want)
			}
		})
	}
}

var (
	linkRE     = regexp.MustCompile(`\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	codeSpanRE = regexp.MustCompile("`[^`]*`")
	headingRE  = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
	htmlIDRE   = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	schemeRE   = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
	mdLinkRE   = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
)

// prose returns a markdown file's lines outside fenced code blocks, with their line numbers.
func prose(text string) (lines []string, numbers []int) {
	fenced := false
	for i, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			lines, numbers = append(lines, l), append(numbers, i+1)
		}
	}
	return lines, numbers
}

// slug is GitHub's anchor for a heading: the rendered text lower-cased, every character but letters,
// marks, digits, '_', '-' and spaces dropped, spaces turned into '-'.
func slug(heading string) string {
	text := mdLinkRE.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsMark(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors returns the anchors of a markdown file: its headings' slugs (the n-th repeat of one gets
// "-n", as GitHub numbers them) and its HTML anchors.
func anchors(text string) map[string]bool {
	out, seen := map[string]bool{}, map[string]int{}
	lines, _ := prose(text)
	for _, l := range lines {
		for _, m := range htmlIDRE.FindAllStringSubmatch(l, -1) {
			out[m[1]] = true
		}
		m := headingRE.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		s := slug(m[2])
		if n := seen[s]; n > 0 {
			out[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}

// checkLinks returns one problem per broken relative link of files (markdown files under root).
func checkLinks(root string, files []string) []string {
	var problems []string
	cache := map[string]map[string]bool{}
	anchorsOf := func(path string) (map[string]bool, error) {
		if a, ok := cache[path]; ok {
			return a, nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		cache[path] = anchors(string(b))
		return cache[path], nil
	}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		name, _ := filepath.Rel(root, file)
		lines, numbers := prose(string(b))
		for i, l := range lines {
			l = codeSpanRE.ReplaceAllString(l, "``")
			for _, m := range linkRE.FindAllStringSubmatch(l, -1) {
				target := m[1]
				if schemeRE.MatchString(target) {
					continue
				}
				where := fmt.Sprintf("%s:%d: link %s", name, numbers[i], target)
				path, anchor, _ := strings.Cut(target, "#")
				dest := file
				if path != "" {
					dest = filepath.Join(filepath.Dir(file), filepath.FromSlash(path))
					if _, err := os.Stat(dest); err != nil {
						problems = append(problems, fmt.Sprintf("%s: %s: no such file", where, path))
						continue
					}
				}
				if anchor == "" || !strings.HasSuffix(dest, ".md") {
					continue
				}
				a, err := anchorsOf(dest)
				if err != nil {
					problems = append(problems, fmt.Sprintf("%s: %v", where, err))
					continue
				}
				if !a[anchor] {
					problems = append(problems, fmt.Sprintf("%s: %s has no heading %q", where, filepath.Base(dest), anchor))
				}
			}
		}
	}
	return problems
}
