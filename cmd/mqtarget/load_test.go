package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mqtarget/mqtarget/config"
	"github.com/mqtarget/mqtarget/internal/drive/load"
	"github.com/mqtarget/mqtarget/internal/serve"
	"github.com/mqtarget/mqtarget/internal/version"
)

// startEmbedded starts mqtarget in this process on 127.0.0.1 with embedded nsqd, as `mqtarget` alone does.
func startEmbedded(t *testing.T) *serve.App {
	t.Helper()
	cfg, _, err := config.Load(config.Sources{Args: []string{"-http.addr", "127.0.0.1:0"}, LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil {
		t.Fatal(err)
	}
	a, err := serve.Start(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Shutdown(context.Background()) })
	return a
}

// TestLoadCommand loads /send1 of an in-process mqtarget: every 2xx is a message nsqd holds, and the
// meta names the target's build, configuration and broker.
func TestLoadCommand(t *testing.T) {
	a := startEmbedded(t)
	var out, errOut bytes.Buffer
	code := run([]string{"load", "-connections", "2", "-duration", "200ms", "-o", "json", "http://" + a.Addr() + "/send1?size=100&topic=loadtest"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var r struct {
		Requests, OK, Errors int64
		ByStatus             map[string]int64 `json:"by_status"`
		Throughput           float64
		Meta                 struct {
			Broker, Model, Endpoint string
			BrokerVersion           string `json:"broker_version"`
			Connections             int
			Target                  struct {
				Version       string
				DefaultBroker string `json:"default_broker"`
				Config        map[string]any
			}
		}
	}
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if r.OK == 0 || r.OK != r.Requests || r.ByStatus["200"] != r.OK || r.Errors != 0 || r.Throughput <= 0 {
		t.Fatalf("result %s", out.String())
	}
	m := r.Meta
	if m.Broker != "nsq" || !strings.HasPrefix(m.BrokerVersion, "nsqd v1.") || m.Model != "closed" || m.Connections != 2 || m.Endpoint != "/send1" ||
		m.Target.Version != version.Get().Version || m.Target.DefaultBroker != "nsq" || m.Target.Config["topic"] != "mqtarget" {
		t.Errorf("meta %+v", m)
	}
	nsqHTTP, _ := a.Embedded("nsq").Setup["http"].([]string)
	resp, err := http.Get("http://" + nsqHTTP[0] + "/stats?format=json&topic=loadtest")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var stats struct {
		Topics []struct {
			Name  string `json:"topic_name"`
			Count int64  `json:"message_count"`
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&stats); err != nil || len(stats.Topics) != 1 {
		t.Fatalf("nsqd stats: %v %+v", err, stats)
	}
	if stats.Topics[0].Count != r.OK {
		t.Errorf("nsqd holds %d messages on loadtest, load counted %d ok", stats.Topics[0].Count, r.OK)
	}
}

func TestLoadCommandBadInput(t *testing.T) {
	body := filepath.Join(t.TempDir(), "missing")
	u := "http://127.0.0.1:1/send1"
	cases := []struct {
		name string
		args []string
		flag string
	}{
		{"no model", []string{"-duration", "1s", u}, "-rate or -connections"},
		{"both models", []string{"-rate", "10", "-connections", "2", u}, "-rate and -connections"},
		{"negative rate", []string{"-rate", "-1", u}, "-rate"},
		{"rate not a number", []string{"-rate", "many", u}, "-rate"},
		{"negative connections", []string{"-connections", "-3", u}, "-connections"},
		{"duration", []string{"-rate", "10", "-duration", "0s", u}, "-duration"},
		{"timeout", []string{"-rate", "10", "-timeout", "-1s", u}, "-timeout"},
		{"max workers", []string{"-rate", "10", "-max-workers", "-1", u}, "-max-workers"},
		{"method", []string{"-rate", "10", "-method", "DELETE", u}, "-method"},
		{"format", []string{"-rate", "10", "-o", "xml", u}, "-o"},
		{"body file", []string{"-rate", "10", "-body", "@" + body, u}, "-body"},
		{"unknown flag", []string{"-threads", "4", u}, "-threads"},
		{"no URL", []string{"-rate", "10"}, "one URL"},
		{"two URLs", []string{"-rate", "10", u, u}, "one URL"},
		{"URL scheme", []string{"-rate", "10", "ftp://127.0.0.1/x"}, "URL"},
		{"URL without host", []string{"-rate", "10", "http:///send1"}, "URL"},
		{"rate too high", []string{"-rate", "2000000", u}, "-rate: must be 1..1000000"},
		{"rate past int", []string{"-rate", "9223372036854775808", u}, "-rate"},
		{"connections too many", []string{"-connections", "100000", u}, "-connections: must be 1..10000"},
		{"duration too long", []string{"-rate", "10", "-duration", "1000h", u}, "-duration: must be > 0 and <= 24h0m0s"},
		{"timeout too long", []string{"-rate", "10", "-timeout", "1000h", u}, "-timeout: must be > 0 and <= 10m0s"},
		{"max workers too many", []string{"-rate", "10", "-max-workers", "9223372036854775807", u}, "-max-workers: must be 0..100000"},
		{"body file too large", []string{"-rate", "10", "-body", "@" + bigFile(t), u}, "-body: "},
		{"cpuprofile unwritable", []string{"-rate", "10", "-cpuprofile", filepath.Join(body, "cpu.prof"), u}, "-cpuprofile"},
		{"max error rate negative", []string{"-rate", "10", "-max-error-rate", "-0.1", u}, "-max-error-rate: must be 0..1"},
		{"max error rate over 1", []string{"-rate", "10", "-max-error-rate", "5", u}, "-max-error-rate: must be 0..1"},
		{"max error rate NaN", []string{"-rate", "10", "-max-error-rate", "NaN", u}, "-max-error-rate: must be 0..1"},
		{"ramp not numbers", []string{"-rate", "10:x", u}, "-rate"},
		{"ramp end zero", []string{"-rate", "10:0", u}, "-rate"},
		{"ramp too high", []string{"-rate", "10:2000000", u}, "-rate: the ramp's end must be 1..1000000"},
		{"ramp closed model", []string{"-rate", "0:10", "-connections", "2", u}, "-rate: a ramp is for the open model"},
		{"warmup negative", []string{"-rate", "10", "-warmup", "-1s", u}, "-warmup"},
		{"shard not I/N", []string{"-rate", "10", "-shard", "1", u}, "-shard"},
		{"shard index past", []string{"-rate", "10", "-shard", "3/3", u}, "-shard"},
		{"shard of zero", []string{"-rate", "10", "-shard", "0/0", u}, "-shard"},
		{"shards too many", []string{"-rate", "10", "-shard", "0/5000", u}, "-shard"},
		{"shards past connections", []string{"-connections", "2", "-shard", "0/3", u}, "-shard: 3 shards need at least 3 connections"},
		{"start-at garbage", []string{"-rate", "10", "-start-at", "soon", u}, "-start-at"},
		{"start-at passed", []string{"-rate", "10", "-start-at", "2020-01-01T00:00:00Z", u}, "-start-at: 2020-01-01T00:00:00Z passed"},
		{"start-at far", []string{"-rate", "10", "-start-at", "2999-01-01T00:00:00Z", u}, "-start-at: at most 24h"},
		{"find-max without slo", []string{"-find-max", "-rate", "10", u}, "-slo"},
		{"find-max bad slo", []string{"-find-max", "-rate", "10", "-slo", "p99=3ms", u}, "-slo"},
		{"find-max closed", []string{"-find-max", "-connections", "10", "-slo", "p99<3ms", u}, "-find-max: needs the open model"},
		{"find-max ramp", []string{"-find-max", "-rate", "10:20", "-slo", "p99<3ms", u}, "-find-max: steps at constant rates"},
		{"find-max sharded", []string{"-find-max", "-rate", "10", "-shard", "0/2", "-slo", "p99<3ms", u}, "-find-max: judges each step's whole load"},
		{"find-max steps", []string{"-find-max", "-rate", "1", "-step", "1", "-max-rate", "2000", "-slo", "p99<3ms", u}, "-step: 2000 steps"},
		{"find-max max below rate", []string{"-find-max", "-rate", "100", "-max-rate", "10", "-slo", "p99<3ms", u}, "-max-rate"},
		{"step without find-max", []string{"-rate", "10", "-step", "5", u}, "-step: only with -find-max"},
		{"slo without find-max", []string{"-rate", "10", "-slo", "p99<1ms", u}, "-slo: only with -find-max"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if code := run(append([]string{"load"}, c.args...), &out, &errOut); code != 2 {
				t.Fatalf("exit %d, want 2: %s", code, errOut.String())
			}
			if !strings.Contains(errOut.String(), c.flag) {
				t.Errorf("message %q does not name %s", errOut.String(), c.flag)
			}
		})
	}
}

// TestFindMaxDefaultMaxRate: without -max-rate a search goes as far as the step bound allows, so
// -rate and -step alone (docs/load-testing.md's example) are a valid search: it runs (exit 1 here, the
// target refusing every connection), it is not refused as bad input.
func TestFindMaxDefaultMaxRate(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run([]string{"load", "-find-max", "-rate", "500", "-step", "500", "-slo", "p99<10ms,errors<0.1%",
		"-duration", "100ms", "http://127.0.0.1:1/send1"}, &out, &errOut)
	if code != 1 || !strings.Contains(out.String()+errOut.String(), "no rate met") {
		t.Fatalf("exit %d, want 1 (no rate met): %s%s", code, out.String(), errOut.String())
	}
}

// TestFindMaxWithoutA2xx: a goal on latency alone, met by a target answering only 404 (a wrong path),
// measured nothing: the search fails (exit 1) naming the step, as a sweep's find_max does, instead of
// reporting the 404s' rate as the maximum.
func TestFindMaxWithoutA2xx(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	var out, errOut bytes.Buffer
	code := run([]string{"load", "-find-max", "-rate", "50", "-max-rate", "50", "-slo", "p99<5s",
		"-duration", "200ms", srv.URL + "/nosuch"}, &out, &errOut)
	if code != 1 || !strings.Contains(errOut.String(), "50/s met the goal with") || !strings.Contains(errOut.String(), "2xx") {
		t.Fatalf("exit %d, want 1 naming the step met without a 2xx answer: %s%s", code, out.String(), errOut.String())
	}
}

// bigFile is a sparse file one byte larger than a -body may be: no disk is used, and nothing reads it all.
func bigFile(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "big")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(load.MaxBodyBytes + 1); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestLoadCommandFlagsAfterURL: flags may follow the URL (the flag package alone stops at it).
func TestLoadCommandFlagsAfterURL(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	var out, errOut bytes.Buffer
	if code := run([]string{"load", srv.URL + "/send1", "-connections", "1", "-duration", "50ms", "-o", "csv"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if !strings.HasPrefix(out.String(), "endpoint,broker,model,connections") || !strings.Contains(out.String(), "/send1,,closed,1,") {
		t.Errorf("csv %q", out.String())
	}
}

// TestLoadCommandFailure: a run is a failure (exit 1, the result printed all the same, the reason on
// stderr) when no answer was 2xx, when nothing answered, or when more requests failed than
// -max-error-rate allows; the error bodies are in the table and the JSON.
func TestLoadCommandFailure(t *testing.T) {
	var n atomic.Int64
	mixed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1)%10 == 0 {
			http.Error(w, "broker unavailable", http.StatusServiceUnavailable)
		}
	}))
	defer mixed.Close()
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":"size: must be 1..1048576"}`, http.StatusBadRequest)
	}))
	defer bad.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + ln.Addr().String() + "/send1"
	ln.Close()
	cases := []struct {
		name     string
		args     []string
		code     int
		stderr   string
		stdout   []string
		notInOut string
	}{
		{"all 400, table", []string{"-connections", "1", bad.URL + "/send1?size=0"}, 1, "failed: no 2xx answer: ",
			[]string{"400:", `400 said`, `size: must be 1..1048576`}, ""},
		{"all 400, json", []string{"-connections", "1", "-o", "json", bad.URL + "/send1?size=0"}, 1, "failed: no 2xx answer",
			[]string{`"error_bodies": {`, `"400": [`, `size: must be 1..1048576`}, ""},
		{"all 400, open model", []string{"-rate", "100", bad.URL + "/send1"}, 1, "failed: no 2xx answer", []string{"400 said"}, ""},
		{"refused", []string{"-connections", "1", refused}, 1, "without an answer", []string{"connection refused"}, ""},
		{"refused, even with -max-error-rate 1", []string{"-rate", "100", "-max-error-rate", "1", refused}, 1, "no 2xx answer", nil, ""},
		// The open model sends its 30 requests however slowly the machine answers (every 10th is a 503).
		{"10% 503 over the default 1%", []string{"-rate", "200", mixed.URL + "/send1"}, 1, "more than -max-error-rate 1%",
			[]string{"503 said", "broker unavailable"}, ""},
		{"10% 503 within -max-error-rate 0.2", []string{"-rate", "200", "-max-error-rate", "0.2", mixed.URL + "/send1"}, 0, "",
			[]string{"503 said"}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(append([]string{"load", "-duration", "150ms"}, c.args...), &out, &errOut)
			if code != c.code {
				t.Fatalf("exit %d, want %d: %s\n%s", code, c.code, errOut.String(), out.String())
			}
			if !strings.Contains(errOut.String(), c.stderr) || c.stderr == "" && errOut.Len() > 0 {
				t.Errorf("stderr %q, want %q", errOut.String(), c.stderr)
			}
			for _, want := range c.stdout {
				if !strings.Contains(out.String(), want) {
					t.Errorf("output lacks %q:\n%s", want, out.String())
				}
			}
		})
	}
}

// TestLoadCommandSendsOnlyToTheURL: a target that redirects everything (its index and /config too) to a
// second listener: in neither model does anything arrive there, the 302s are counted as answers, and
// the run failed. (TestNoProxyFromEnvironment in internal/drive/load: no proxy either.)
func TestLoadCommandSendsOnlyToTheURL(t *testing.T) {
	var landed atomic.Int64
	elsewhere := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { landed.Add(1) }))
	defer elsewhere.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+"/landed", http.StatusFound)
	}))
	defer srv.Close()
	for _, model := range [][]string{{"-connections", "1"}, {"-rate", "100"}} {
		var out, errOut bytes.Buffer
		if code := run(append([]string{"load", "-duration", "100ms", srv.URL + "/send1"}, model...), &out, &errOut); code != 1 {
			t.Errorf("%s: exit %d, want 1: %s", model[0], code, errOut.String())
		}
		if !strings.Contains(out.String(), "302:") || !strings.Contains(errOut.String(), "× 302") {
			t.Errorf("%s: 302s not counted:\n%s\n%s", model[0], out.String(), errOut.String())
		}
	}
	if n := landed.Load(); n != 0 {
		t.Errorf("%d requests followed the redirect to another listener", n)
	}
}
