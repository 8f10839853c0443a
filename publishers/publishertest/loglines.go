package publishertest

import (
	"fmt"
	"os"
	"strings"
)

// LogLines returns the last max lines of the log file at path that contain any of words
// (case-insensitive): what a test prints of a real broker's log when it fails, such as the lines of its
// recovery after a kill (a log kept across restarts ends with the latest).
func LogLines(path string, max int, words ...string) string {
	raw, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	var out []string
	for line := range strings.Lines(string(raw)) {
		l := strings.ToLower(line)
		for _, w := range words {
			if strings.Contains(l, strings.ToLower(w)) {
				out = append(out, strings.TrimRight(line, "\n"))
				break
			}
		}
	}
	if len(out) == 0 {
		return fmt.Sprintf("(no line of %s names any of %q)", path, words)
	}
	if len(out) > max {
		out = append([]string{fmt.Sprintf("... %d earlier", len(out)-max)}, out[len(out)-max:]...)
	}
	return strings.Join(out, "\n")
}
