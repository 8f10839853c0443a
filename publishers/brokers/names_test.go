package brokers_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mqtarget/mqtarget/publishers/brokers"
)

// pendingNames are the files that still name a broker outside its package, each with why: the issue's
// acceptance allows none but the broker list, so this list may only shrink.
var pendingNames = map[string]string{
	// Cross-broker test harness (imported by tests only): each broker's harness (start, stop, freeze,
	// count) moving beside its package is the rest of #18 item 1.
	"internal/itest/": "test harness",
	// Anchor benchmarks: each is one broker's direct client, measured against mqtarget; no part of it.
	"cmd/bench-": "one broker's anchor benchmark",
}

// TestNoBrokerNamedOutsideItsPackage is #18's acceptance: `grep -ril <broker> --include='*.go' .`
// outside publishers/<broker>/ and test files lists the broker list only, for every registered broker,
// so that adding a broker is its package and one line in the list.
func TestNoBrokerNamedOutsideItsPackage(t *testing.T) {
	root := filepath.Join("..", "..")
	list := filepath.Join("publishers", "brokers", "brokers.go")
	for _, b := range brokers.List {
		t.Run(b.Name, func(t *testing.T) {
			own := filepath.Join("publishers", b.Name) + string(filepath.Separator)
			err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
				if err != nil {
					return err
				}
				rel, _ := filepath.Rel(root, path)
				if d.IsDir() {
					if strings.HasPrefix(d.Name(), ".") && rel != "." || d.Name() == "testdata" {
						return filepath.SkipDir
					}
					return nil
				}
				if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") || rel == list || strings.HasPrefix(rel, own) {
					return nil
				}
				for prefix := range pendingNames {
					if strings.HasPrefix(filepath.ToSlash(rel), prefix) {
						return nil
					}
				}
				text, err := os.ReadFile(path)
				if err != nil {
					return err
				}
				if strings.Contains(strings.ToLower(string(text)), strings.ToLower(b.Name)) {
					t.Errorf("%s names broker %s: only %s and the broker list may", rel, b.Name, own)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}
