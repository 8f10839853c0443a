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
// (p99(/send1) <= p99(direct) + p99(hop) + 1 ms), and sums the CPU per message of each side.
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
		"| 1 | 0.500 / 0.600 | 1.700 / 1.800 | 0.200 | met (met in 2 of 2) | 2.000 / 2.000 | 9.000 / 9.000 | 0.900 / 0.900 ; 9.000 / 9.000 | 0.50 | 0.62 |",
		"| 4 | 0.500 / 0.500 | 1.701 / 1.000 | 0.200 | not met (met in 1 of 2) |",
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
			// need_tools is stubbed: the check must come before it (and before any broker starts)
			cmd := exec.Command(bash, "-c", `source "$1" && need_tools() { :; } && bench_init 23999 t && echo "order=$RUN_ORDER"`, "x", lib)
			cmd.Env = append(os.Environ(), "BENCH_ORDER="+tc.order, "BENCH_FLOOR="+tc.floor)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			switch {
			case tc.want == "":
				if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "BENCH_ORDER") {
					t.Errorf("BENCH_ORDER=%q: %v, %q; want exit 2 naming BENCH_ORDER", tc.order, err, out)
				}
			case err != nil || !strings.Contains(string(out), "order="+tc.want+"\n"):
				t.Errorf("BENCH_ORDER=%q: %v, %q; want order=%s", tc.order, err, out, tc.want)
			}
		})
	}
}
