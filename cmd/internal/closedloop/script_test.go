package closedloop

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/internal/drive/load"
)

// anchorLib is bash and the absolute path of scripts/lib/anchor-bench.sh; without bash the test is skipped.
func anchorLib(t *testing.T) (bash, lib string) {
	t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	lib, err = filepath.Abs("../../../scripts/lib/anchor-bench.sh")
	if err != nil {
		t.Fatal(err)
	}
	return bash, lib
}

// TestScriptTable: scripts/lib/anchor-bench.sh reads the line Result.String prints (the direct runs)
// beside wrk's (mqtarget, the floor, the hop), judges each /send1 run against the direct run beside it
// and its round's hop (p99(/send1) <= p99(direct) + p99(hop) + 1 ms), then the medians of each side's
// p99s against the same bound, and sums the CPU per message of each side.
func TestScriptTable(t *testing.T) {
	bash, lib := anchorLib(t)
	direct := func(p99 float64) string {
		return Result{Duration: time.Second, Sent: 1000, Latency: load.Latency{P50: 0.05, P99: p99, P999: 2, Max: 3}, CPU: 20 * time.Millisecond}.String() + " broker_us=30.0"
	}
	wrk := func(rate, p99, cpu string) string {
		return "rate=" + rate + " p50_ms=0.100 p99_ms=" + p99 + " p999_ms=9.000 max_ms=9.500 failed=0 sent=500 cpu_us=" + cpu + " client_us=10.0 broker_us=30.0"
	}
	tmp := t.TempDir()
	rows := strings.Join([]string{
		"n=1 run=1 client=direct " + direct(0.5),
		"n=1 run=2 client=send1 " + wrk("500", "1.700", "40"), // 0.5 + 0.2 + 1 = 1.7: met
		"n=1 run=3 client=floor " + wrk("800", "0.900", "25"),
		"n=1 run=4 client=floor " + wrk("800", "0.900", "25"),
		"n=1 run=5 client=send1 " + wrk("500", "1.800", "40"), // against the second direct: 0.6 + 0.2 + 1 = 1.8: met
		"n=1 run=6 client=direct " + direct(0.6),
		"n=1 run=7 client=healthz " + wrk("2000", "0.200", "40"),
		"n=4 run=1 client=direct " + direct(0.5),
		"n=4 run=2 client=send1 " + wrk("500", "1.701", "40"), // just over: not met
		"n=4 run=3 client=send1 " + wrk("500", "1.000", "40"),
		"n=4 run=4 client=direct " + direct(0.5),
		"n=4 run=5 client=healthz " + wrk("2000", "0.200", "40"),
		// two rounds (BENCH_ROUNDS=2), the second with /send1 and the floor swapped, its own hop
		"n=16 run=1 round=1 client=direct " + direct(0.5),
		"n=16 run=2 round=1 client=send1 " + wrk("500", "1.500", "40"), // 0.5 + 0.2 + 1: met
		"n=16 run=3 round=1 client=floor " + wrk("800", "1.000", "25"),
		"n=16 run=4 round=1 client=floor " + wrk("800", "1.000", "25"),
		"n=16 run=5 round=1 client=send1 " + wrk("500", "1.500", "40"), // met
		"n=16 run=6 round=1 client=direct " + direct(0.5),
		"n=16 run=7 round=1 client=healthz " + wrk("2000", "0.200", "40"),
		"n=16 run=8 round=2 client=direct " + direct(0.5),
		"n=16 run=9 round=2 client=floor " + wrk("800", "1.200", "25"),
		"n=16 run=10 round=2 client=send1 " + wrk("500", "3.000", "40"), // 0.5 + 1.0 + 1 = 2.5: not met
		"n=16 run=11 round=2 client=send1 " + wrk("500", "2.400", "40"), // met by round 2's hop only
		"n=16 run=12 round=2 client=floor " + wrk("800", "1.200", "25"),
		"n=16 run=13 round=2 client=direct " + direct(0.5),
		"n=16 run=14 round=2 client=healthz " + wrk("2000", "1.000", "40"),
	}, "\n") + "\n"
	if err := os.WriteFile(filepath.Join(tmp, "rows"), []byte(rows), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bash, "-c", `source "$1" && TMP="$2" && tails_table "the direct client"`, "x", lib, tmp)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("tails_table: %v\n%s", err, out)
	}
	for _, want := range []string{
		"| 1 | 1 | the direct client | 1000 | 0.050 | 0.500 | 2.000 | 3.000 | 0 | 20.0µs | - | 30.0µs |",
		"| 1 | 2 | mqtarget `/send1` (wrk) | 500 | 0.100 | 1.700 | 9.000 | 9.500 | 0 | 10.0µs | 40µs | 30.0µs |",
		"| 1 | 0.500 / 0.600 | 1.700 / 1.800 | 0.200 | met (met in 2 of 2) | 2.000 / 2.000 | 9.000 / 9.000 | 0.900 / 0.900 ; 9.000 / 9.000 | 0.50 | 0.62 | 1.750 ≤ 0.550 + 0.200 + 1: met | 0.900: met |",
		"| 4 | 0.500 / 0.500 | 1.701 / 1.000 | 0.200 | not met (met in 1 of 2) | 2.000 / 2.000 | 9.000 / 9.000 | - | 0.50 | - | 1.351 ≤ 0.500 + 0.200 + 1: met | - |",
		// medians: /send1 (1.5 + 2.4) / 2, the hop (0.2 + 1.0) / 2, the floor (1.0 + 1.2) / 2
		"| 16 | 0.500 / 0.500 / 0.500 / 0.500 | 1.500 / 1.500 / 3.000 / 2.400 | 0.200 / 1.000 | not met (met in 3 of 4) |",
		"| 1.950 ≤ 0.500 + 0.600 + 1: met | 1.100: met |",
		// direct 20 + 30 = 50 µs at 1000/s: 0.05 cores; the floor 10 + 25 + 30 = 65 at 800/s; mqtarget
		// 10 + 40 + 30 = 80 at 500/s, 15 over the floor; the hop's 40 µs leave 0 for the publish path
		"| 1 | 20.0 + 30.0 = 50.0 (0.05) | 10.0 + 25.0 + 30.0 = 65.0 (0.05) | 10.0 + 40.0 + 30.0 = 80.0 (0.04) | 10.0 + 40.0 | 15.0 | 0.0 vs 20.0 | 0.62 | 0.50 |",
		// without floor runs (BENCH_FLOOR=0) its columns stay empty
		"| 4 | 20.0 + 30.0 = 50.0 (0.05) | - + - + - = - (-) | 10.0 + 40.0 + 30.0 = 80.0 (0.04) | 10.0 + 40.0 | - | 0.0 vs 20.0 | 0.62 | 0.50 |",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

// TestScriptOrder: BENCH_ORDER reorders the runs tails_runs makes for every N; an order that leaves a
// run out, adds one, or names a floor run with BENCH_FLOOR=0 exits 2 naming BENCH_ORDER, before
// anything is started.
func TestScriptOrder(t *testing.T) {
	bash, lib := anchorLib(t)
	for _, tc := range []struct {
		name, order, floor string
		want               string // RUN_ORDER; "": exit 2
	}{
		{"default", "", "", "direct send1 floor floor send1 direct"},
		{"floor first", "direct floor send1 send1 floor direct", "", "direct floor send1 send1 floor direct"},
		{"extra spaces", " direct  floor send1 send1 floor direct ", "", " direct  floor send1 send1 floor direct "},
		{"no floor", "", "0", "direct send1 send1 direct"},
		{"no floor, reordered", "send1 direct direct send1", "0", "send1 direct direct send1"},
		{"a run left out", "direct floor send1 send1 floor", "", ""},
		{"a run added", "direct floor send1 send1 floor direct direct", "", ""},
		{"an unknown run", "direct floor send1 send1 floor healthz", "", ""},
		{"a floor run without the floor", "direct floor send1 send1 floor direct", "0", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkInit(t, bash, lib, "BENCH_ORDER", "order=$RUN_ORDER", "order="+tc.want, tc.want == "", "BENCH_ORDER="+tc.order, "BENCH_FLOOR="+tc.floor)
		})
	}
}

// TestScriptClientFigures: http_tail's result line from each client's own output, wrk's BENCH line
// (scripts/wrk/bench.lua) and mqtarget load's CSV (load.Result.Write), is the line the table reads:
// the rate of 2xx answers, the percentiles, failed = non-2xx answers + transport errors, and the
// client's CPU per request.
func TestScriptClientFigures(t *testing.T) {
	bash, lib := anchorLib(t)
	r := load.Result{Requests: 1000, OK: 990, ByStatus: map[string]int64{"200": 990, "503": 6}, Errors: 4, DurationS: 2,
		Latency: load.Latency{P50: 0.25, P90: 0.5, P99: 1.5, P999: 3.25, Max: 4}, Meta: load.Meta{Endpoint: "/send1", Model: "closed", Connections: 4}}
	var csv strings.Builder
	if err := r.Write(&csv, "csv"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, figures, input string
	}{
		// each with what else the client prints around it (the measured run's stdout and stderr are one file)
		{"wrk", "wrk_figures", "Running 2s test @ http://127.0.0.1:23780/send1\n  1 threads and 4 connections\nBENCH requests=1000 ok=990 non2xx=6 codes=503:6 connect=0 read=3 write=0 timeout=1 duration_us=2000000 p50_us=250 p99_us=1500 p999_us=3250 max_us=4000\n"},
		{"mqtarget load", "load_figures", "a warning on stderr, first\n" + csv.String()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// 0.5 s of the client's CPU over 1000 requests: 500 µs each
			cmd := exec.Command(bash, "-c", `source "$1" && `+tc.figures+` | tail_line 0 0 0.5`, "x", lib)
			cmd.Stdin = strings.NewReader(tc.input)
			out, err := cmd.CombinedOutput()
			want := "rate=495 p50_ms=0.250 p99_ms=1.500 p999_ms=3.250 max_ms=4.000 failed=10 sent=990 cpu_us=0 client_us=500.0\n"
			if err != nil || string(out) != want {
				t.Errorf("%s: %v\n got %q\nwant %q", tc.figures, err, out, want)
			}
		})
	}
}

// TestScriptClient: BENCH_CLIENT picks the HTTP client of the /send1, floor and hop runs (wrk by
// default, or mqtarget load) and the name the tables give it; anything else exits 2 naming it.
func TestScriptClient(t *testing.T) {
	bash, lib := anchorLib(t)
	for _, tc := range []struct {
		name, client, want string // want: HTTP_CLIENT/CLIENT_LABEL; "": exit 2
	}{
		{"default", "", "wrk/wrk"},
		{"wrk", "wrk", "wrk/wrk"},
		{"load", "load", "load/mqtarget load"},
		{"unknown", "hey", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkInit(t, bash, lib, "BENCH_CLIENT", "client=$HTTP_CLIENT/$CLIENT_LABEL", "client="+tc.want, tc.want == "", "BENCH_CLIENT="+tc.client)
		})
	}
}

// checkInit runs bench_init with env added to the environment, then echoes show (a shell word): the
// output must hold the line want, or with refused the run must exit 2 naming setting. need_tools is
// stubbed: a setting's check must come before it (and before any broker starts).
func checkInit(t *testing.T, bash, lib, setting, show, want string, refused bool, env ...string) {
	t.Helper()
	cmd := exec.Command(bash, "-c", `source "$1" && need_tools() { :; } && bench_init 23999 t && echo "`+show+`"`, "x", lib)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case refused:
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), setting) {
			t.Errorf("%q: %v, %q; want exit 2 naming %s", env, err, out, setting)
		}
	case err != nil || !strings.Contains(string(out), want+"\n"):
		t.Errorf("%q: %v, %q; want %s", env, err, out, want)
	}
}

// TestScriptRounds: -r / BENCH_ROUNDS repeats every N's runs (1..20, else exit 2 naming it), the even
// rounds with /send1's and the floor's places swapped, so that over two rounds each side has each place.
func TestScriptRounds(t *testing.T) {
	bash, lib := anchorLib(t)
	for _, tc := range []struct {
		name, rounds, want string // want: ROUNDS; "": exit 2
	}{
		{"default", "", "1"},
		{"three", "3", "3"},
		{"the largest", "20", "20"},
		{"none", "0", ""},
		{"too many", "21", ""},
		{"not a number", "2x", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkInit(t, bash, lib, "--rounds (BENCH_ROUNDS)", "rounds=$ROUNDS", "rounds="+tc.want, tc.want == "", "BENCH_ROUNDS="+tc.rounds)
		})
	}
	for _, tc := range []struct {
		name, order, round, want string
	}{
		{"first round", "direct send1 floor floor send1 direct", "1", "direct send1 floor floor send1 direct"},
		{"second round swaps", "direct send1 floor floor send1 direct", "2", "direct floor send1 send1 floor direct"},
		{"third round as the first", "direct send1 floor floor send1 direct", "3", "direct send1 floor floor send1 direct"},
		{"no floor", "direct send1 send1 direct", "2", "direct send1 send1 direct"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := exec.Command(bash, "-c", `source "$1" && RUN_ORDER="$2" && round_order "$3"`, "x", lib, tc.order, tc.round).CombinedOutput()
			if err != nil || string(out) != tc.want+"\n" {
				t.Errorf("round_order %s of %q: %v, %q; want %q", tc.round, tc.order, err, out, tc.want)
			}
		})
	}
}
