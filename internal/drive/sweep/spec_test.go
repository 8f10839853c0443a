package sweep

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/internal/drive/load"
)

// known stands for the broker list (cmd/mqtarget checks the example specs against the real one).
func known(name string) bool {
	return slices.Contains([]string{"nsq", "stomp", "rocketmq", "kafka"}, name)
}

const validSpec = `
title: t
method: post
timeout: 2s
axes:
  endpoints: [/send1, /send2]
  brokers: [nsq, stomp]
  connections: [1, 8]
  rates: [100]
  sizes: [1, 100]
  topics: [5]
  durations: [1s]
`

func TestParse(t *testing.T) {
	s, err := Parse([]byte(validSpec), known)
	if err != nil {
		t.Fatal(err)
	}
	if s.Method != "POST" || s.Timeout != 2*time.Second || s.Title != "t" {
		t.Errorf("spec %+v", s)
	}
	runs := s.Runs()
	if len(runs) != 2*2*2*1*1*3 {
		t.Fatalf("%d runs", len(runs))
	}
	// The load varies fastest, then size; endpoints slowest.
	want := []Run{
		{Endpoint: "/send1", Broker: "nsq", Connections: 1, Size: 1, Topics: 5, Duration: time.Second},
		{Endpoint: "/send1", Broker: "nsq", Connections: 8, Size: 1, Topics: 5, Duration: time.Second},
		{Endpoint: "/send1", Broker: "nsq", Rate: 100, Size: 1, Topics: 5, Duration: time.Second},
		{Endpoint: "/send1", Broker: "nsq", Connections: 1, Size: 100, Topics: 5, Duration: time.Second},
	}
	if !slices.Equal(runs[:4], want) || runs[len(runs)-1].Endpoint != "/send2" || runs[len(runs)-1].Broker != "stomp" {
		t.Errorf("runs %+v", runs)
	}
	if s.TotalDuration() != 24*time.Second {
		t.Errorf("total %v", s.TotalDuration())
	}
}

func TestParseErrorsNameTheField(t *testing.T) {
	base := "axes:\n  endpoints: [/send1]\n  connections: [1, 2, 4]\n  durations: [1s]\n"
	cases := []struct {
		name, spec, want string
	}{
		{"empty", "", "spec: empty"},
		{"not a mapping", "[1, 2]", "spec: must be a mapping"},
		{"unknown top key", base + "urls: x\n", "urls: unknown field"},
		{"unknown axis", "axes:\n  endpoints: [/send1]\n  threads: [1]\n", "axes.threads: unknown field"},
		{"connections 0", "axes:\n  endpoints: [/send1]\n  connections: [1, 2, 0]\n  durations: [1s]\n", "axes.connections[2]: must be > 0"},
		{"connections too many", "axes:\n  endpoints: [/send1]\n  connections: [100000]\n  durations: [1s]\n", "axes.connections[0]: must be <= 10000"},
		{"connections not a number", "axes:\n  endpoints: [/send1]\n  connections: [1, many]\n  durations: [1s]\n", "axes.connections[1]: cannot unmarshal"},
		{"connections not a list", "axes:\n  endpoints: [/send1]\n  connections: 4\n  durations: [1s]\n", "axes.connections: must be a list"},
		{"rate negative", "axes:\n  endpoints: [/send1]\n  rates: [-5]\n  durations: [1s]\n", "axes.rates[0]: must be > 0"},
		{"ramp end not a number", "axes:\n  endpoints: [/send1]\n  rates: [100:x]\n  durations: [1s]\n", "axes.rates[0]: want R or R:R2"},
		{"ramp end 0", "axes:\n  endpoints: [/send1]\n  rates: [10, 100:0]\n  durations: [1s]\n", "axes.rates[1]: want R or R:R2"},
		{"ramp start 0", "axes:\n  endpoints: [/send1]\n  rates: [0:100]\n  durations: [1s]\n", "axes.rates[0]: must be > 0, got 0"},
		{"ramp end too high", "axes:\n  endpoints: [/send1]\n  rates: [1:2000000]\n  durations: [1s]\n", "axes.rates[0]: must be <= 1000000, got 1:2000000"},
		{"rate a list", "axes:\n  endpoints: [/send1]\n  rates: [[1, 2]]\n  durations: [1s]\n", "axes.rates[0]: must be a single value"},
		{"ramp twice", "axes:\n  endpoints: [/send1]\n  rates: [100:500, '100:500']\n  durations: [1s]\n", "axes.rates: a value is listed twice"},
		{"no load point", "axes:\n  endpoints: [/send1]\n  durations: [1s]\n", "axes.connections or axes.rates"},
		{"size 0", base + "  sizes: [0]\n", "axes.sizes[0]: must be > 0"},
		{"topics 0", base + "  topics: [1, 0]\n", "axes.topics[1]: must be > 0"},
		{"no durations", "axes:\n  endpoints: [/send1]\n  connections: [1]\n", "axes.durations: at least one"},
		{"duration not a duration", "axes:\n  endpoints: [/send1]\n  connections: [1]\n  durations: [soon]\n", "axes.durations[0]: cannot unmarshal"},
		{"duration 0", "axes:\n  endpoints: [/send1]\n  connections: [1]\n  durations: [0s]\n", "axes.durations[0]: must be > 0"},
		{"no endpoints", "axes:\n  connections: [1]\n  durations: [1s]\n", "axes.endpoints: at least one"},
		{"endpoint without slash", "axes:\n  endpoints: [send1]\n  connections: [1]\n  durations: [1s]\n", "axes.endpoints[0]"},
		{"endpoint with query", "axes:\n  endpoints: ['/send1?size=3']\n  connections: [1]\n  durations: [1s]\n", "axes.endpoints[0]"},
		{"unknown broker", base + "  brokers: [nsq, pulsar]\n", `axes.brokers[1]: unknown broker "pulsar"`},
		{"duplicate", base + "  sizes: [10, 10]\n", "axes.sizes: a value is listed twice"},
		{"key twice", base + "axes: {}\n", "axes: given twice"},
		{"url scheme", base + "url: ftp://127.0.0.1:1\n", "url:"},
		{"url with path", base + "url: http://127.0.0.1:1/send1\n", "url:"},
		{"method", base + "method: DELETE\n", "method: must be GET or POST"},
		{"timeout negative", base + "timeout: -1s\n", "timeout: must be > 0"},
		{"title a list", base + "title: [a]\n", "title: must be a single value"},
		{"max_workers", base + "max_workers: -1\n", "max_workers: must be 0..100000"},
		{"timeout too long", base + "timeout: 1000h\n", "timeout: must be > 0 and <= 10m0s"},
		{"max_workers too many", base + "max_workers: 9223372036854775807\n", "max_workers: must be 0..100000"},
		{"warmup negative", base + "warmup: -1s\n", "warmup: must be 0..1h0m0s"},
		{"warmup too long", base + "warmup: 2h\n", "warmup: must be 0..1h0m0s"},
		{"warm-ups count", "warmup: 1h\naxes:\n  endpoints: [/a]\n  connections: [1,2,3,4,5,6,7,8,9,10,11,12,13]\n  durations: [1h]\n", "axes.durations: the runs send for 26h0m0s in all"},
		{"size too large", base + "  sizes: [1073741824]\n", "axes.sizes[0]: must be <= 67108864"},
		{"sends for days", "axes:\n  endpoints: [/a, /b]\n  connections: [1,2,3,4,5,6,7,8,9,10,11,12,13]\n  durations: [1h]\n", "axes.durations: the runs send for 26h0m0s in all, at most 24h0m0s"},
		{"too many runs", "axes:\n  endpoints: [/a, /b, /c, /d, /e, /f, /g, /h, /i, /j]\n  sizes: [1,2,3,4,5,6,7,8,9,10]\n  topics: [1,2,3,4,5,6,7,8,9,10]\n  connections: [1,2,3,4,5,6,7,8,9,10,11]\n  durations: [1s]\n", "axes: more than 10000 runs"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.spec), known)
			if err == nil || !strings.HasPrefix(err.Error(), c.want) && !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want %q", err, c.want)
			}
			if err != nil && !strings.HasPrefix(err.Error(), strings.SplitN(c.want, ":", 2)[0]) {
				t.Errorf("error %q does not start with the field %q", err, strings.SplitN(c.want, ":", 2)[0])
			}
		})
	}
}

// TestParseRates: axes.rates takes what `mqtarget load -rate` takes, R or a ramp R:R2, and each run
// carries its ramp to load.Options.
func TestParseRates(t *testing.T) {
	for _, tc := range []struct {
		name, rates string
		want        []Rate
	}{
		{"constant", "[100]", []Rate{{100, 0}}},
		{"ramp", "[100:5000]", []Rate{{100, 5000}}},
		{"ramp quoted", "['100:5000']", []Rate{{100, 5000}}},
		{"ramp down", "[5000:100]", []Rate{{5000, 100}}},
		{"constant and ramps", "[1000, 100:5000, 1:2]", []Rate{{1000, 0}, {100, 5000}, {1, 2}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse([]byte("axes:\n  endpoints: [/send1]\n  rates: "+tc.rates+"\n  durations: [1s]\n"), known)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(s.Axes.Rates, tc.want) {
				t.Errorf("rates %v, want %v", s.Axes.Rates, tc.want)
			}
			runs := s.Runs()
			if len(runs) != len(tc.want) {
				t.Fatalf("%d runs, want %d", len(runs), len(tc.want))
			}
			for i, r := range runs {
				if r.Rate != tc.want[i].From || r.RateTo != tc.want[i].To || r.Connections != 0 {
					t.Errorf("run %d: rate %d, rate_to %d, connections %d; want %v", i, r.Rate, r.RateTo, r.Connections, tc.want[i])
				}
			}
		})
	}
}

func TestRunURL(t *testing.T) {
	cases := []struct {
		run  Run
		want string
	}{
		{Run{Endpoint: "/send1"}, "http://h:1/send1"},
		{Run{Endpoint: "/send2", Broker: "stomp", Size: 100, Topics: 7}, "http://h:1/send2?broker=stomp&size=100&topics=7"},
	}
	for _, c := range cases {
		if got := RunURL("http://h:1", c.run); got != c.want {
			t.Errorf("%+v: %s, want %s", c.run, got, c.want)
		}
	}
}

// TestExampleSpecs keeps scripts/sweeps/ valid, and the smoke sweep under a minute of load.
func TestExampleSpecs(t *testing.T) {
	paths, err := filepath.Glob("../../../scripts/sweeps/*.yaml")
	if err != nil || len(paths) < 4 {
		t.Fatalf("example specs %v, %v", paths, err)
	}
	for _, p := range paths {
		text, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		s, err := Parse(text, known)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if filepath.Base(p) == "smoke.yaml" && (s.URL != "" || s.TotalDuration() > 45*time.Second) {
			t.Errorf("smoke.yaml: url %q, %v of load; it must need nothing running and finish within a minute", s.URL, s.TotalDuration())
		}
	}
}

// TestParseRunCountDoesNotWrap: five axes of 2048 values and 256 load points are 2^63 runs, which wraps
// to a negative int (and 256 more load points to 2^64, 0); the spec is refused with an error naming the
// axes, instead of passing the bound and expanding the grid until the process runs out of memory.
func TestParseRunCountDoesNotWrap(t *testing.T) {
	axis := func(n int, format string) string {
		vs := make([]string, n)
		for i := range vs {
			vs[i] = fmt.Sprintf(format, i+1)
		}
		return "[" + strings.Join(vs, ", ") + "]"
	}
	spec := "axes:\n" +
		"  endpoints: " + axis(2048, "/e%d") + "\n" +
		"  brokers: " + axis(2048, "b%d") + "\n" +
		"  sizes: " + axis(2048, "%d") + "\n" +
		"  topics: " + axis(2048, "%d") + "\n" +
		"  durations: " + axis(2048, "%dms") + "\n" +
		"  connections: " + axis(256, "%d") + "\n"
	for name, extra := range map[string]string{"2^63": "", "2^64": "  rates: " + axis(256, "%d") + "\n"} {
		s, err := Parse([]byte(spec+extra), func(string) bool { return true })
		if err == nil || !strings.HasPrefix(err.Error(), "axes: more than 10000 runs") {
			t.Errorf("%s runs: error %v, want axes: more than 10000 runs", name, err)
		}
		if runs := s.Runs(); runs != nil {
			t.Errorf("%s runs: %d expanded", name, len(runs))
		}
	}
	// A Spec built by hand, never validated, does not expand either.
	big := Spec{Axes: Axes{Endpoints: make([]string, 1<<20), Connections: make([]int, 1<<20), Durations: []time.Duration{time.Second}}}
	if runs := big.Runs(); runs != nil || big.TotalDuration() != math.MaxInt64 {
		t.Errorf("unvalidated spec: %d runs, total %v", len(runs), big.TotalDuration())
	}
}

// TestParseFindMax: a find_max block takes load -find-max's options under their spec names, checked by
// load's own check: each bad one is refused naming its key, and every search stays bounded (its steps
// count as runs against MaxRuns and MaxTotalDuration).
func TestParseFindMax(t *testing.T) {
	axes := "axes:\n  endpoints: [/send1]\n  brokers: [nsq, stomp]\n  durations: [1s]\n"
	cases := []struct {
		name, spec string
		want       string // an error's start, the field; "" for a valid spec
		step       int    // for a valid spec: find_max.step as validated
		points     int
		total      time.Duration
	}{
		{"valid", "find_max:\n  rate: 100\n  step: 50\n  max_rate: 300\n  slo: 'p99<10ms,errors<0.1%'\n" + axes, "", 50, 2, 2 * 5 * time.Second},
		{"step defaults to rate", "find_max: {rate: 100, max_rate: 1000, slo: p99<10ms}\n" + axes, "", 100, 2, 2 * 10 * time.Second},
		{"max_rate equal to rate", "find_max: {rate: 100, max_rate: 100, slo: p99<10ms}\n" + axes, "", 100, 2, 2 * time.Second},
		{"warm-up counted", "warmup: 1s\nfind_max: {rate: 100, max_rate: 200, slo: p99<10ms}\n" + axes, "", 100, 2, 2 * 2 * 2 * time.Second},
		{"not a mapping", "find_max: yes\n" + axes, "find_max: must be a mapping", 0, 0, 0},
		{"unknown key", "find_max: {rate: 100, max_rate: 200, slo: p99<10ms, start: 1}\n" + axes, "find_max.start: unknown field", 0, 0, 0},
		{"no rate", "find_max: {max_rate: 200, slo: p99<10ms}\n" + axes, "find_max.rate: must be 1..1000000", 0, 0, 0},
		{"rate too high", "find_max: {rate: 2000000, max_rate: 200, slo: p99<10ms}\n" + axes, "find_max.rate: must be 1..1000000", 0, 0, 0},
		{"rate a ramp", "find_max: {rate: '100:200', max_rate: 200, slo: p99<10ms}\n" + axes, "find_max.rate: cannot unmarshal", 0, 0, 0},
		{"step negative", "find_max: {rate: 100, step: -5, max_rate: 200, slo: p99<10ms}\n" + axes, "find_max.step: must be 1..1000000, got -5", 0, 0, 0},
		{"no max_rate", "find_max: {rate: 100, slo: p99<10ms}\n" + axes, "find_max.max_rate: must be 100 (find_max.rate)..1000000, got 0", 0, 0, 0},
		{"max_rate below rate", "find_max: {rate: 100, max_rate: 50, slo: p99<10ms}\n" + axes, "find_max.max_rate: must be 100 (find_max.rate)", 0, 0, 0},
		{"too many steps", "find_max: {rate: 1, step: 1, max_rate: 5000, slo: p99<10ms}\n" + axes, "find_max.step: 5000 steps from 1 to 5000, at most 1000", 0, 0, 0},
		{"no slo", "find_max: {rate: 100, max_rate: 200}\n" + axes, "find_max.slo: a goal is needed", 0, 0, 0},
		{"bad slo", "find_max: {rate: 100, max_rate: 200, slo: 'p98<10ms'}\n" + axes, `find_max.slo: "p98<10ms": unknown metric`, 0, 0, 0},
		{"slo not a duration", "find_max: {rate: 100, max_rate: 200, slo: 'p99<10'}\n" + axes, "find_max.slo: \"p99<10\": p99 needs a duration", 0, 0, 0},
		{"slo a list", "find_max: {rate: 100, max_rate: 200, slo: [p99<10ms]}\n" + axes, "find_max.slo: must be a single value", 0, 0, 0},
		{"with connections", "find_max: {rate: 100, max_rate: 200, slo: p99<10ms}\n" + axes + "  connections: [1]\n", "axes.connections: find_max steps the open model's rate", 0, 0, 0},
		{"with rates", "find_max: {rate: 100, max_rate: 200, slo: p99<10ms}\n" + axes + "  rates: [100]\n", "axes.rates: with find_max the rates are find_max.rate", 0, 0, 0},
		// 2 brokers × 10 sizes × 1000 steps: 20000 runs.
		{"too many runs", "find_max: {rate: 1, max_rate: 1000, slo: p99<10ms}\naxes:\n  endpoints: [/send1]\n  brokers: [nsq, stomp]\n  sizes: [1,2,3,4,5,6,7,8,9,10]\n  durations: [1ms]\n",
			"find_max: 20 searches of up to 1000 steps are more than 10000 runs", 0, 0, 0},
		// 2 brokers × 1000 steps × 1 min: 33 h.
		{"sends for days", "find_max: {rate: 1, max_rate: 1000, slo: p99<10ms}\naxes:\n  endpoints: [/send1]\n  brokers: [nsq, stomp]\n  durations: [1m]\n",
			"find_max: its searches send for up to 33h20m0s in all", 0, 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := Parse([]byte(c.spec), known)
			if fail := err != nil; fail || c.want != "" {
				if !fail || c.want == "" || !strings.HasPrefix(err.Error(), c.want) {
					t.Errorf("error %v, want %q", err, c.want)
				}
				return
			}
			runs := s.Runs()
			if s.FindMax.Step != c.step || len(runs) != c.points || s.TotalDuration() != c.total {
				t.Errorf("step %d, %d points, total %v; want %d, %d, %v", s.FindMax.Step, len(runs), s.TotalDuration(), c.step, c.points, c.total)
			}
			for _, r := range runs {
				if r.Rate != s.FindMax.Rate || r.RateTo != 0 || r.Connections != 0 {
					t.Errorf("point %+v: want the search's first rate %d", r, s.FindMax.Rate)
				}
			}
		})
	}
	// A Spec built by hand with an unbounded search expands nothing.
	big := Spec{FindMax: &FindMax{Rate: 1, FindOptions: load.FindOptions{Step: 1, MaxRate: 1 << 40}},
		Axes: Axes{Endpoints: []string{"/a"}, Durations: []time.Duration{time.Second}}}
	if runs := big.Runs(); runs != nil || big.TotalDuration() != math.MaxInt64 {
		t.Errorf("unvalidated search: %d points, total %v", len(runs), big.TotalDuration())
	}
}
