// Package sweep runs a grid of load runs described by a YAML spec (endpoint × broker × connections or
// rate × size × topics × duration) one after another against a mqtarget, and writes results.csv,
// results.json, summary.md and charts. With find_max, each point of the grid is a search for the
// highest rate that meets a goal (load.FindMax) instead.
package sweep

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/mqtarget/mqtarget/internal/drive/load"
)

// Spec is a sweep.
type Spec struct {
	Title string `yaml:"title"`
	// URL is the base URL of a running mqtarget; empty: the caller starts one (embedded brokers).
	URL     string        `yaml:"url"`
	Method  string        `yaml:"method"`  // GET (default) or POST
	Timeout time.Duration `yaml:"timeout"` // per request; 0: load.DefaultTimeout
	// MaxWorkers bounds the open model's requests in flight (0: load.DefaultMaxWorkers).
	MaxWorkers int `yaml:"max_workers"`
	// Warmup is sent before each run's duration and counted apart (load.Options.Warmup).
	Warmup time.Duration `yaml:"warmup"`
	// FindMax, when set, makes each point of the grid a search for the highest rate that meets a goal
	// (load.FindMax) instead of fixed-rate runs.
	FindMax *FindMax `yaml:"find_max"`
	Axes    Axes     `yaml:"axes"`
}

// FindMax is a spec's find_max block: `mqtarget load -find-max`'s flags. Every point of the grid
// (endpoint × broker × size × topics × duration) runs Rate, then Step more each time, up to MaxRate,
// until a step breaks SLO.
type FindMax struct {
	Rate             int `yaml:"rate"` // the first step's rate (-rate)
	load.FindOptions     // step (-step; 0: Rate), max_rate (-max-rate; required), slo (-slo)
}

// findKey names a search option (load.FindOptions.Check's flag name) as the spec's key.
func findKey(flag string) string {
	if flag == "find-max" {
		return "find_max"
	}
	return "find_max." + strings.ReplaceAll(flag, "-", "_")
}

// Axes are the values each run takes one of. Connections and Rates are the load points: each value of
// either makes runs (closed and open model), and at least one of them is given.
type Axes struct {
	Endpoints   []string        `yaml:"endpoints"`
	Brokers     []string        `yaml:"brokers"` // empty: the target's default broker
	Connections []int           `yaml:"connections"`
	Rates       []Rate          `yaml:"rates"`
	Sizes       []int           `yaml:"sizes"`  // payload bytes (?size=); empty: the target's default
	Topics      []int           `yaml:"topics"` // ?topics= spread; empty: one topic
	Durations   []time.Duration `yaml:"durations"`
}

// Rate is a value of axes.rates: From requests per second, or with To > 0 a linear ramp from From to To
// over the run's duration, written R:R2 as `mqtarget load -rate` takes it (load.ParseRate).
type Rate struct{ From, To int }

// UnmarshalYAML reads 1000 or 100:5000 (quoted or not: either is a plain scalar to YAML 1.2).
func (r *Rate) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return errors.New("must be R or R:R2")
	}
	from, to, err := load.ParseRate(n.Value)
	if err != nil {
		return err
	}
	*r = Rate{from, to}
	return nil
}

func (r Rate) String() string {
	if r.To > 0 {
		return strconv.Itoa(r.From) + ":" + strconv.Itoa(r.To)
	}
	return strconv.Itoa(r.From)
}

// Bounds of a spec, to keep a typo from running for days.
const (
	MaxConnections = load.MaxConnections
	MaxRate        = load.MaxRate
	MaxRuns        = 10000
	MaxDuration    = time.Hour
	// MaxTotalDuration bounds the sum of the runs' durations and warm-ups: how long a sweep sends.
	MaxTotalDuration = 24 * time.Hour
	MaxTimeout       = 10 * time.Minute
	MaxSize          = 64 << 20 // the largest message.max_size a mqtarget accepts
	MaxTopics        = 1_000_000
	// MaxSpecBytes bounds a spec file: 10000 runs need far less.
	MaxSpecBytes = 1 << 20
)

// Parse reads a spec strictly: unknown keys and bad values are errors naming the field, such as
// "axes.connections[2]: must be > 0". knownBroker says whether a broker name exists.
func Parse(data []byte, knownBroker func(string) bool) (Spec, error) {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return Spec{}, errors.New("spec: empty")
		}
		return Spec{}, fmt.Errorf("spec: %w", err)
	}
	var s Spec
	if len(doc.Content) == 0 {
		return s, errors.New("spec: empty")
	}
	axes := fields{
		"endpoints":   list(&s.Axes.Endpoints),
		"brokers":     list(&s.Axes.Brokers),
		"connections": list(&s.Axes.Connections),
		"rates":       list(&s.Axes.Rates),
		"sizes":       list(&s.Axes.Sizes),
		"topics":      list(&s.Axes.Topics),
		"durations":   list(&s.Axes.Durations),
	}
	top := fields{
		"title":       scalar(&s.Title),
		"url":         scalar(&s.URL),
		"method":      scalar(&s.Method),
		"timeout":     scalar(&s.Timeout),
		"max_workers": scalar(&s.MaxWorkers),
		"warmup":      scalar(&s.Warmup),
		"find_max": func(n *yaml.Node, path string) error {
			s.FindMax = &FindMax{}
			return fields{
				"rate":     scalar(&s.FindMax.Rate),
				"step":     scalar(&s.FindMax.Step),
				"max_rate": scalar(&s.FindMax.MaxRate),
				"slo": func(n *yaml.Node, path string) error {
					var text string
					if err := scalar(&text)(n, path); err != nil {
						return err
					}
					slo, err := load.ParseSLO(text)
					if err != nil {
						return fmt.Errorf("%s: %w (line %d)", path, err, n.Line)
					}
					s.FindMax.SLO = slo
					return nil
				},
			}.decode(n, path)
		},
		"axes": axes.decode,
	}
	if err := top.decode(doc.Content[0], ""); err != nil {
		return Spec{}, err
	}
	return s, s.validate(knownBroker)
}

// fields decodes a mapping's values by key; a key not in it is an error naming it.
type fields map[string]func(n *yaml.Node, path string) error

func (f fields) decode(n *yaml.Node, path string) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("%s: must be a mapping (line %d)", orSpec(path), n.Line)
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, val := n.Content[i].Value, n.Content[i+1]
		p := join(path, key)
		dec, ok := f[key]
		if !ok {
			known := make([]string, 0, len(f))
			for k := range f {
				known = append(known, k)
			}
			slices.Sort(known)
			return fmt.Errorf("%s: unknown field (line %d); known: %s", p, n.Content[i].Line, strings.Join(known, ", "))
		}
		if seen[key] {
			return fmt.Errorf("%s: given twice (line %d)", p, n.Content[i].Line)
		}
		seen[key] = true
		if err := dec(val, p); err != nil {
			return err
		}
	}
	return nil
}

func scalar[T any](dst *T) func(*yaml.Node, string) error {
	return func(n *yaml.Node, path string) error {
		if n.Kind != yaml.ScalarNode {
			return fmt.Errorf("%s: must be a single value (line %d)", path, n.Line)
		}
		if err := n.Decode(dst); err != nil {
			return fmt.Errorf("%s: %s (line %d)", path, typeError(err), n.Line)
		}
		return nil
	}
}

func list[T any](dst *[]T) func(*yaml.Node, string) error {
	return func(n *yaml.Node, path string) error {
		if n.Kind != yaml.SequenceNode {
			return fmt.Errorf("%s: must be a list, e.g. [1, 2, 4] (line %d)", path, n.Line)
		}
		*dst = make([]T, len(n.Content))
		for i, e := range n.Content {
			if err := scalar(&(*dst)[i])(e, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		return nil
	}
}

// typeError shortens yaml's "yaml: unmarshal errors:\n  line 3: cannot unmarshal …" to its reason.
func typeError(err error) string {
	msg := err.Error()
	if i := strings.LastIndex(msg, ": cannot"); i >= 0 {
		msg = msg[i+2:]
	}
	return strings.TrimSpace(msg)
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func orSpec(path string) string {
	if path == "" {
		return "spec"
	}
	return path
}

func (s *Spec) validate(knownBroker func(string) bool) error {
	if s.URL != "" {
		u, err := load.ValidateURL(s.URL)
		if err != nil {
			return fmt.Errorf("url: %w", err)
		}
		if strings.Trim(u.Path, "/") != "" || u.RawQuery != "" {
			return fmt.Errorf("url: %q: give the base URL only (scheme, host, port); endpoints are in axes.endpoints", s.URL)
		}
		s.URL = strings.TrimRight(s.URL, "/")
	}
	s.Method = strings.ToUpper(s.Method)
	switch s.Method {
	case "":
		s.Method = http.MethodGet
	case http.MethodGet, http.MethodPost:
	default:
		return fmt.Errorf("method: must be GET or POST, got %q", s.Method)
	}
	if s.Timeout < 0 || s.Timeout > MaxTimeout {
		return fmt.Errorf("timeout: must be > 0 and <= %v, got %v", MaxTimeout, s.Timeout)
	}
	if s.MaxWorkers < 0 || s.MaxWorkers > load.MaxWorkers {
		return fmt.Errorf("max_workers: must be 0..%d, got %d", load.MaxWorkers, s.MaxWorkers)
	}
	if s.Warmup < 0 || s.Warmup > MaxDuration {
		return fmt.Errorf("warmup: must be 0..%v, got %v", MaxDuration, s.Warmup)
	}
	a := &s.Axes
	if len(a.Endpoints) == 0 {
		return errors.New("axes.endpoints: at least one endpoint, e.g. [/send1]")
	}
	for i, e := range a.Endpoints {
		if !strings.HasPrefix(e, "/") || strings.ContainsAny(e, "?# ") {
			return fmt.Errorf("axes.endpoints[%d]: %q must be a path starting with / (parameters come from the other axes)", i, e)
		}
	}
	for i, b := range a.Brokers {
		if !knownBroker(b) {
			return fmt.Errorf("axes.brokers[%d]: unknown broker %q", i, b)
		}
	}
	if err := s.validateFindMax(); err != nil {
		return err
	}
	if len(a.Connections) == 0 && len(a.Rates) == 0 && s.FindMax == nil {
		return errors.New("axes.connections or axes.rates: give at least one load point")
	}
	if err := inRange("axes.connections", a.Connections, 1, MaxConnections); err != nil {
		return err
	}
	for i, r := range a.Rates {
		switch {
		case r.From < 1:
			return fmt.Errorf("axes.rates[%d]: must be > 0, got %d", i, r.From)
		case r.From > MaxRate || r.To > MaxRate:
			return fmt.Errorf("axes.rates[%d]: must be <= %d, got %s", i, MaxRate, r)
		}
	}
	if err := inRange("axes.sizes", a.Sizes, 1, MaxSize); err != nil {
		return err
	}
	if err := inRange("axes.topics", a.Topics, 1, MaxTopics); err != nil {
		return err
	}
	if len(a.Durations) == 0 {
		return errors.New("axes.durations: at least one duration, e.g. [10s]")
	}
	for i, d := range a.Durations {
		if d <= 0 || d > MaxDuration {
			return fmt.Errorf("axes.durations[%d]: must be > 0 and <= %v, got %v", i, MaxDuration, d)
		}
	}
	for _, ax := range []struct {
		name string
		dup  bool
	}{
		{"endpoints", hasDup(a.Endpoints)}, {"brokers", hasDup(a.Brokers)}, {"connections", hasDup(a.Connections)},
		{"rates", hasDup(a.Rates)}, {"sizes", hasDup(a.Sizes)}, {"topics", hasDup(a.Topics)}, {"durations", hasDup(a.Durations)},
	} {
		if ax.dup {
			return fmt.Errorf("axes.%s: a value is listed twice", ax.name)
		}
	}
	if _, _, err := s.counts(); err != nil {
		return err
	}
	if total := s.TotalDuration(); total > MaxTotalDuration {
		if s.FindMax != nil {
			return fmt.Errorf("find_max: its searches send for up to %v in all (every step run), at most %v", total, MaxTotalDuration)
		}
		return fmt.Errorf("axes.durations: the runs send for %v in all, at most %v", total, MaxTotalDuration)
	}
	return nil
}

// validateFindMax checks the find_max block with load's own check (load.FindOptions.Check), naming
// its keys; step 0 becomes rate, as load's -step.
func (s *Spec) validateFindMax() error {
	f := s.FindMax
	if f == nil {
		return nil
	}
	switch {
	case len(s.Axes.Connections) > 0:
		return errors.New("axes.connections: find_max steps the open model's rate; closed-model runs do not go with it")
	case len(s.Axes.Rates) > 0:
		return errors.New("axes.rates: with find_max the rates are find_max.rate, find_max.step and find_max.max_rate")
	case f.Rate < 1 || f.Rate > MaxRate:
		return fmt.Errorf("find_max.rate: must be 1..%d (the first step's rate), got %d", MaxRate, f.Rate)
	}
	if f.Step == 0 {
		f.Step = f.Rate
	}
	return f.Check(load.Options{Rate: f.Rate}, findKey)
}

// counts are the grid's points and the runs they make, checked: the axes' lengths multiply, and a
// product past MaxRuns is an error before it can wrap around (2^63 becomes negative in an int and
// passes any upper bound). Without find_max every point is one run; with it a point is a search of up
// to find_max's steps, each a run.
func (s *Spec) counts() (points, runs int, err error) {
	a := &s.Axes
	loads := len(a.Connections) + len(a.Rates)
	if s.FindMax != nil {
		loads = 1
	}
	points = 1
	for _, f := range []int{len(a.Endpoints), max(len(a.Brokers), 1), max(len(a.Sizes), 1), max(len(a.Topics), 1),
		len(a.Durations), loads} {
		// Every factor is at most a list's length, far below MaxInt/MaxRuns: n*f cannot overflow while
		// n <= MaxRuns.
		if points *= f; points > MaxRuns {
			return 0, 0, fmt.Errorf("axes: more than %d runs (the axes' lengths multiply)", MaxRuns)
		}
	}
	if s.FindMax == nil {
		return points, points, nil
	}
	// Steps is at most load.MaxSteps once validated, but a Spec built by hand may hold anything.
	steps := 1
	if s.FindMax.Step >= 1 {
		steps = s.FindMax.Steps(s.FindMax.Rate)
	}
	if steps < 1 || steps > MaxRuns || points > MaxRuns/steps {
		return 0, 0, fmt.Errorf("find_max: %d searches of up to %d steps are more than %d runs", points, steps, MaxRuns)
	}
	return points, points * steps, nil
}

func inRange(name string, vs []int, lo, hi int) error {
	for i, v := range vs {
		if v < lo {
			return fmt.Errorf("%s[%d]: must be > %d, got %d", name, i, lo-1, v)
		}
		if v > hi {
			return fmt.Errorf("%s[%d]: must be <= %d, got %d", name, i, hi, v)
		}
	}
	return nil
}

func hasDup[T comparable](vs []T) bool {
	seen := map[T]bool{}
	for _, v := range vs {
		if seen[v] {
			return true
		}
		seen[v] = true
	}
	return false
}

// Run is one point of the grid. Zero Size or Topics: the parameter is not sent.
type Run struct {
	Endpoint, Broker  string
	Connections, Rate int // one is > 0
	RateTo            int // > 0: the open model's rate ramps from Rate to RateTo over Duration
	Size, Topics      int
	Duration          time.Duration
}

// Runs expands the axes in a fixed order: endpoint, broker, size, topics, duration, then the load
// points (connections, then rates), so the load varies fastest and a chart's line is measured in one go.
// With find_max each is a point of the grid, whose search starts at Rate (find_max.rate).
func (s Spec) Runs() []Run {
	if _, _, err := s.counts(); err != nil {
		return nil // not a spec Parse accepted; never expand an unbounded grid
	}
	a := s.Axes
	orNone := func(v []int) []int {
		if len(v) == 0 {
			return []int{0}
		}
		return v
	}
	brokers := a.Brokers
	if len(brokers) == 0 {
		brokers = []string{""}
	}
	var runs []Run
	for _, e := range a.Endpoints {
		for _, b := range brokers {
			for _, size := range orNone(a.Sizes) {
				for _, t := range orNone(a.Topics) {
					for _, d := range a.Durations {
						r := Run{Endpoint: e, Broker: b, Size: size, Topics: t, Duration: d}
						for _, c := range a.Connections {
							r.Connections, r.Rate, r.RateTo = c, 0, 0
							runs = append(runs, r)
						}
						for _, rate := range a.Rates {
							r.Connections, r.Rate, r.RateTo = 0, rate.From, rate.To
							runs = append(runs, r)
						}
						if s.FindMax != nil {
							r.Connections, r.Rate, r.RateTo = 0, s.FindMax.Rate, 0
							runs = append(runs, r)
						}
					}
				}
			}
		}
	}
	return runs
}

// TotalDuration is the sum of the runs' durations: how long the sweep sends (with find_max, at most:
// every step of every search). Every run takes each duration once per other combination, so the sum is
// checked without expanding the grid; it saturates at MaxInt64 rather than wrap.
func (s Spec) TotalDuration() time.Duration {
	_, n, err := s.counts()
	if err != nil || len(s.Axes.Durations) == 0 {
		return math.MaxInt64
	}
	per := int64(n / len(s.Axes.Durations)) // runs for each duration
	var total int64
	for _, d := range s.Axes.Durations {
		d += s.Warmup // each run sends its warm-up first; both bounded by MaxDuration, so no overflow
		if d < 0 || per > 0 && int64(d) > (math.MaxInt64-total)/per {
			return math.MaxInt64
		}
		total += int64(d) * per
	}
	return time.Duration(total)
}
