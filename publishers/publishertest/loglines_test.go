package publishertest

import (
	"os"
	"path/filepath"
	"testing"
)

func TestLogLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "node.log")
	log := "boot 1: Recovering 2 queues\nnoise\nboot 2: Queue q DROPPED 0/3/0 persistent messages\nboot 2: recovering 1 queue\n"
	if err := os.WriteFile(path, []byte(log), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		path  string
		max   int
		words []string
		want  string
	}{
		{"every match", path, 10, []string{"recover", "dropped"}, "boot 1: Recovering 2 queues\nboot 2: Queue q DROPPED 0/3/0 persistent messages\nboot 2: recovering 1 queue"},
		{"the last ones", path, 1, []string{"recover"}, "... 1 earlier\nboot 2: recovering 1 queue"},
		{"no match", path, 10, []string{"unclean"}, `(no line of ` + path + ` names any of ["unclean"])`},
		{"no file", path + ".gone", 10, []string{"x"}, "(no log: open " + path + ".gone: no such file or directory)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := LogLines(tc.path, tc.max, tc.words...); got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}
