package brokers_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mqtarget/mqtarget/publishers/brokers"
)

// mayName are the places beside its package that name one broker, each its own per broker: its
// harness in internal/itest (start, stop, freeze, count what it holds) and its anchor benchmark's
// direct client under cmd/ (measured against mqtarget; no part of it). Nothing else may.
func mayName(broker, rel string) bool {
	if rel == "internal/itest/"+broker+".go" {
		return true
	}
	anchors := map[string][]string{ // default: cmd/bench-<broker>/
		"nsq":      {"cmd/bench-nsq/", "cmd/bench-nsqfloor/"},
		"stomp":    {"cmd/bench-stompanchor/"},
		"rocketmq": {"cmd/bench-rmqdirect/"},
	}[broker]
	if anchors == nil {
		anchors = []string{"cmd/bench-" + broker + "/"}
	}
	for _, a := range anchors {
		if strings.HasPrefix(rel, a) {
			return true
		}
	}
	return false
}

// TestNoBrokerNamedOutsideItsPackage is #18's acceptance: `grep -ril <broker> --include='*.go' .`
// outside publishers/<broker>/ and test files lists the broker list only, for every registered broker,
// but for the broker's own harness and anchor (mayName), so that adding a broker is its package, its
// harness, its anchor and one line in the list.
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
				if mayName(b.Name, filepath.ToSlash(rel)) {
					return nil
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
