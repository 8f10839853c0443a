package main

import (
	"bytes"
	"encoding/json"
	"go/parser"
	"go/token"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/mqtarget/mqtarget/config"
)

// TestShardedLoadMerged: three `mqtarget load -shard I/3 -start-at T` processes against one mqtarget
// with its embedded nsqd, then `mqtarget report` of their three results: the merged requests and 2xx
// are the sums, the merged rate is the load's, the shards began together, and nsqd holds exactly the
// merged 2xx.
func TestShardedLoadMerged(t *testing.T) {
	a := startEmbedded(t)
	dir := t.TempDir()
	url := "http://" + a.Addr() + "/send1?size=100&topic=shards"
	start := time.Now().Add(time.Second).UTC().Format(time.RFC3339Nano)
	var cmds []*exec.Cmd
	var files []string
	for i := range 3 {
		file := filepath.Join(dir, "shard"+strconv.Itoa(i)+".json")
		files = append(files, file)
		out, err := os.Create(file)
		if err != nil {
			t.Fatal(err)
		}
		defer out.Close()
		args := []string{"load", "-rate", "300", "-duration", "1s", "-shard", strconv.Itoa(i) + "/3", "-start-at", start, "-o", "json", url}
		cmd, _, stderr := command(t, args...) // a process of its own, as on three machines
		cmd.Stdout = out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("shard %d stderr: %s", i, stderr.String())
			}
		})
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("shard %d: %v", i, err)
		}
	}
	type result struct {
		Requests, OK int64
		NotSent      int64 `json:"not_sent"`
		Meta         struct {
			Rate   int
			Shard  string
			Shards []string
			Start  time.Time
		}
	}
	var sumReq, sumOK int64
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var r result
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("%s: %v: %s", f, err, b)
		}
		if want, _ := time.Parse(time.RFC3339Nano, start); !r.Meta.Start.Equal(want) || r.NotSent != 0 {
			t.Errorf("%s: start %v, want %v; not sent %d", f, r.Meta.Start, want, r.NotSent)
		}
		sumReq += r.Requests
		sumOK += r.OK
	}
	var out, errOut bytes.Buffer
	if code := run(append([]string{"report", "-o", "json"}, files...), &out, &errOut); code != 0 {
		t.Fatalf("report: exit %d: %s", code, errOut.String())
	}
	var m result
	if err := json.Unmarshal(out.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	if m.Requests != sumReq || m.OK != sumOK || m.Requests != 300 || m.Meta.Rate != 300 || strings.Join(m.Meta.Shards, " ") != "0/3 1/3 2/3" {
		t.Errorf("merged %d requests %d ok (sums %d, %d), rate %d, shards %v; want 300 requests at 300/s", m.Requests, m.OK, sumReq, sumOK, m.Meta.Rate, m.Meta.Shards)
	}
	nsqHTTP, _ := a.Embedded("nsq").Setup["http"].([]string)
	resp, err := http.Get("http://" + nsqHTTP[0] + "/stats?format=json&topic=shards")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var stats struct {
		Topics []struct {
			Count int64 `json:"message_count"`
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&stats); err != nil || len(stats.Topics) != 1 {
		t.Fatalf("nsqd stats: %v %+v", err, stats)
	}
	if stats.Topics[0].Count != m.OK {
		t.Errorf("nsqd holds %d messages, the merged report %d 2xx", stats.Topics[0].Count, m.OK)
	}
	// A shard missing is refused, naming it.
	errOut.Reset()
	if code := run(append([]string{"report"}, files[0], files[2]), &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "shard 1/3 missing") {
		t.Errorf("report of 2 of 3 shards: exit %d: %s", code, errOut.String())
	}
}

func TestReportBadInput(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	notJSON := write("table.txt", "url  GET http://x\n")
	unknown := write("other.json", `{"requests": 1, "color": "red"}`)
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no file", nil, "no result file"},
		{"missing file", []string{filepath.Join(dir, "none.json")}, "none.json"},
		{"not json", []string{notJSON}, "table.txt: not a result of mqtarget load -o json"},
		{"unknown field", []string{unknown}, `other.json: not a result of mqtarget load -o json: json: unknown field "color"`},
		{"format", []string{"-o", "xml", notJSON}, "-o"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if code := run(append([]string{"report"}, c.args...), &out, &errOut); code != 2 || !strings.Contains(errOut.String(), c.want) {
				t.Errorf("exit %d: %q, want 2 and %q", code, errOut.String(), c.want)
			}
		})
	}
}

// TestFindMaxCommand: -find-max against a target that is always fast stops at -max-rate with every step
// met, says so, and draws its chart.
func TestFindMaxCommand(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	code := run([]string{"load", "-find-max", "-rate", "50", "-step", "50", "-max-rate", "100", "-slo", "p99<1s,errors<1%",
		"-duration", "300ms", "-chart", dir, "-o", "json", srv.URL}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var fr struct {
		MaxRate int `json:"max_rate"`
		Broke   string
		Steps   []struct {
			Rate   int
			Met    bool
			Result struct{ Requests int }
		}
	}
	if err := json.Unmarshal(out.Bytes(), &fr); err != nil {
		t.Fatal(err)
	}
	if fr.MaxRate != 100 || fr.Broke != "" || len(fr.Steps) != 2 || !fr.Steps[1].Met || fr.Steps[1].Result.Requests != 30 {
		t.Errorf("search %+v", fr)
	}
	for _, ext := range []string{"png", "svg"} {
		if st, err := os.Stat(filepath.Join(dir, "find-max."+ext)); err != nil || st.Size() == 0 {
			t.Errorf("chart %s: %v", ext, err)
		}
	}
}

// TestHelpListsSubcommands: `mqtarget help` and `mqtarget -h` name every subcommand (the first line a
// newcomer reads), and help exits 0.
func TestHelpListsSubcommands(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"-h"}} {
		var out, errOut bytes.Buffer
		code := run(args, &out, &errOut)
		text := out.String() + errOut.String()
		if code != 0 {
			t.Errorf("%v: exit %d", args, code)
		}
		for _, sub := range subcommandNames() {
			if !strings.Contains(text, "mqtarget "+sub) {
				t.Errorf("%v does not list %s:\n%s", args, sub, text)
			}
		}
	}
}

// subcommandNames are the names run dispatches on besides serve.
func subcommandNames() []string {
	return append(slices.Sorted(maps.Keys(interruptible)), "healthcheck", "version", "help")
}

// TestPackageDocListsSubcommands: go doc's first screen (main.go's package comment) names every
// subcommand too; it had fallen behind when report came.
func TestPackageDocListsSubcommands(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "main.go", nil, parser.PackageClauseOnly|parser.ParseComments)
	if err != nil || f.Doc == nil {
		t.Fatalf("main.go's package comment: %v", err)
	}
	words := strings.FieldsFunc(f.Doc.Text(), func(r rune) bool { return !unicode.IsLetter(r) })
	for _, sub := range append(subcommandNames(), "serve") {
		if !slices.Contains(words, sub) {
			t.Errorf("main.go's package comment does not name the subcommand %s:\n%s", sub, f.Doc.Text())
		}
	}
}

// TestJSONLogDurations: the JSON log prints durations as text ("202ms"), not integer nanoseconds, in
// top-level and grouped attributes alike.
func TestJSONLogDurations(t *testing.T) {
	var buf bytes.Buffer
	log := newLogger(config.Log{Level: "info", Format: "json"}, &buf)
	log.Info("published", "took", 202*time.Millisecond, slog.Group("retry", "after", 1500*time.Microsecond))
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatal(err)
	}
	if line["took"] != "202ms" || line["retry"].(map[string]any)["after"] != "1.5ms" {
		t.Errorf("log line %s", buf.String())
	}
}
