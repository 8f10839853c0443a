package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mqtarget/mqtarget/config"
	"github.com/mqtarget/mqtarget/internal/app"
	"github.com/mqtarget/mqtarget/internal/version"
)

// startEmbedded starts mqtarget in this process on 127.0.0.1 with embedded nsqd, as `mqtarget` alone does.
func startEmbedded(t *testing.T) *app.App {
	t.Helper()
	cfg, _, err := config.Load(config.Sources{Args: []string{"-http.addr", "127.0.0.1:0"}, LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.Start(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
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
	_, nsqHTTP := a.EmbeddedNSQ()
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

// TestLoadCommandFlagsAfterURL: flags may follow the URL (the flag package alone stops at it).
func TestLoadCommandFlagsAfterURL(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"load", "http://127.0.0.1:1/send1", "-connections", "1", "-duration", "50ms", "-o", "csv"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if !strings.HasPrefix(out.String(), "endpoint,broker,model,connections") || !strings.Contains(out.String(), "/send1,,closed,1,") {
		t.Errorf("csv %q", out.String())
	}
}
