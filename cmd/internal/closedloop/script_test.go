package closedloop

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/internal/drive/load"
)

// TestScriptTable: scripts/lib/anchor-bench.sh reads the line Result.String prints (the direct runs)
// beside wrk's (runs 2, 3 and the hop), and judges each /send1 run against the direct run beside it:
// p99(/send1) <= p99(direct) + p99(hop) + 1 ms.
func TestScriptTable(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	lib, err := filepath.Abs("../../../scripts/lib/anchor-bench.sh")
	if err != nil {
		t.Fatal(err)
	}
	direct := func(p99 float64) string {
		return Result{Duration: time.Second, Sent: 1000, Latency: load.Latency{P50: 0.05, P99: p99, P999: 2, Max: 3}}.String()
	}
	wrk := func(p99 string) string {
		return "rate=500 p50_ms=0.100 p99_ms=" + p99 + " p999_ms=9.000 max_ms=9.500 failed=0 sent=500 cpu_us=40"
	}
	tmp := t.TempDir()
	rows := strings.Join([]string{
		"n=1 run=1 client=direct " + direct(0.5),
		"n=1 run=2 client=send1 " + wrk("1.700"), // 0.5 + 0.2 + 1 = 1.7: met
		"n=1 run=3 client=send1 " + wrk("1.800"), // against run 4: 0.6 + 0.2 + 1 = 1.8: met
		"n=1 run=4 client=direct " + direct(0.6),
		"n=1 run=5 client=healthz " + wrk("0.200"),
		"n=4 run=1 client=direct " + direct(0.5),
		"n=4 run=2 client=send1 " + wrk("1.701"), // just over: not met
		"n=4 run=3 client=send1 " + wrk("1.000"),
		"n=4 run=4 client=direct " + direct(0.5),
		"n=4 run=5 client=healthz " + wrk("0.200"),
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
		"| 1 | 1 | the direct client | 1000 | 0.050 | 0.500 | 2.000 | 3.000 | 0 | - |",
		"| 1 | 2 | mqtarget `/send1` (wrk) | 500 | 0.100 | 1.700 | 9.000 | 9.500 | 0 | 40µs |",
		"| 1 | 0.500 / 0.600 | 1.700 / 1.800 | 0.200 | met (met in 2 of 2) | 2.000 / 2.000 | 9.000 / 9.000 | 0.50 |",
		"| 4 | 0.500 / 0.500 | 1.701 / 1.000 | 0.200 | not met (met in 1 of 2) |",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}
