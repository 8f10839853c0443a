package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mqtarget/mqtarget/handlers"
	"github.com/mqtarget/mqtarget/internal/testport"
)

// The test binary doubles as mqtarget: with MQTARGET_TEST_MAIN set it runs main, so the tests below
// exercise the real process (flags, signals, exit codes) without a separate build.
func TestMain(m *testing.M) {
	if os.Getenv("MQTARGET_TEST_MAIN") == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

func command(t *testing.T, args ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "MQTARGET_TEST_MAIN=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	return cmd, &stdout, &stderr
}

// TestOutOfTheBox is `go run ./cmd/mqtarget` with -embedded_brokers stomp,nats,mqtt: embedded nsqd,
// go-stomp, nats-server and mochi-mqtt, every endpoint 2xx on each (/send3Host too: each runs at least
// three servers by default), clean exit on SIGTERM.
func TestOutOfTheBox(t *testing.T) {
	addr := testport.Addr(t)
	embedded := []string{"stomp", "nats", "mqtt"}
	cmd, _, stderr := command(t, "-http.addr", addr, "-embedded_brokers", strings.Join(embedded, ","))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var waitErr error
	exited := make(chan struct{})
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	base := "http://" + addr
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(base + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("not healthy within 20s: %v\n%s", err, stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Every route of the endpoint table answers 2xx: the send endpoints on every embedded broker, with
	// each of their methods; the others on GET.
	async := 0 // /sendAsync and /sendAsyncWait requests: one message each
	for _, e := range handlers.Endpoints() {
		targets, methods := []string{e.Path}, []string{http.MethodGet}
		if e.Send {
			targets, methods = []string{e.Path}, e.Methods
			for _, b := range embedded {
				targets = append(targets, e.Path+"?broker="+b)
			}
			if strings.HasPrefix(e.Path, "/sendAsync") {
				async += len(targets) * len(methods)
			}
		}
		for _, target := range targets {
			for _, method := range methods {
				req, _ := http.NewRequest(method, base+target, nil)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatalf("%s %s: %v", method, target, err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode/100 != 2 {
					t.Errorf("%s %s: %d %s, want 2xx", method, target, resp.StatusCode, body)
				}
			}
		}
	}
	metrics := get(t, base+"/metrics")
	for _, name := range []string{
		`mqtarget_http_request_duration_seconds_bucket{code="200",method="get",route="/send1"`,
		`mqtarget_publish_duration_seconds_bucket{broker="nsq"`,
		`mqtarget_publish_messages_total{broker="nsq"`,
		`mqtarget_publish_messages_total{broker="stomp"`,
		`mqtarget_publish_messages_total{broker="nats"`,
		`mqtarget_publish_messages_total{broker="mqtt"`,
		fmt.Sprintf(`mqtarget_async_messages_total{result="accepted"} %d`, async),
		`mqtarget_async_in_flight 0`,
	} {
		if !strings.Contains(metrics, name) {
			t.Errorf("/metrics lacks %s", name)
		}
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
		if waitErr != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", waitErr, stderr)
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("still running 15s after SIGTERM\n%s", stderr)
	}
	log := stderr.String()
	for _, want := range []string{"embedded nsqd listening", "async publishes drained", fmt.Sprintf("accepted=%d acked=%d failed=0", async, async), "abandoned=0", "shutdown complete"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
	if _, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		t.Error("still listening after exit")
	}
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func TestCommandLine(t *testing.T) {
	cases := []struct {
		name     string
		args     []string
		env      []string
		exitCode int
		stdout   []string
		stderr   []string
	}{
		{"print config defaults", []string{"-print-config"}, nil, 0,
			[]string{"addr: :8080", "broker: nsq", "size: 100", "max_size: 1048576"}, nil},
		{"flag beats env", []string{"-print-config", "-http.addr", "127.0.0.1:9"}, []string{"MQTARGET_HTTP_ADDR=127.0.0.1:7"}, 0,
			[]string{"addr: 127.0.0.1:9"}, nil},
		{"env applies", []string{"-print-config"}, []string{"MQTARGET_NSQ_HOSTS=127.0.0.1:4150,127.0.0.1:4250"}, 0,
			[]string{"- 127.0.0.1:4150", "- 127.0.0.1:4250"}, nil},
		{"bad host names the field", []string{"-nsq.hosts", "127.0.0.1:4150,nope"}, nil, 2,
			nil, []string{"nsq.hosts[1]:"}},
		{"bad broker", []string{"-broker", "pulsar"}, nil, 2, nil, []string{"broker:", "pulsar"}},
		{"rocketmq without name servers", []string{"-broker", "rocketmq"}, nil, 2, nil,
			[]string{"rocketmq.name_servers:", "not enabled by this configuration"}},
		{"pprof addr printed", []string{"-print-config", "-pprof.addr", "127.0.0.1:6060"}, nil, 0,
			[]string{"pprof:\n  addr: 127.0.0.1:6060\n"}, nil},
		{"pprof addr from env", []string{"-print-config"}, []string{"MQTARGET_PPROF_ADDR=127.0.0.1:6061"}, 0,
			[]string{"pprof:\n  addr: 127.0.0.1:6061\n"}, nil},
		{"bad pprof addr", []string{"-pprof.addr", "6060"}, nil, 2, nil, []string{"pprof.addr:", `"6060"`}},
		{"bad size from env names the variable", nil, []string{"MQTARGET_MESSAGE_SIZE=big"}, 2,
			nil, []string{"message.size", "MQTARGET_MESSAGE_SIZE"}},
		{"unknown flag", []string{"-nope"}, nil, 2, nil, []string{"flag provided but not defined: -nope"}},
		{"unknown env var names it", []string{"-print-config"}, []string{"MQTARGET_NSQ_HOST=127.0.0.1:4150"}, 2,
			nil, []string{"MQTARGET_NSQ_HOST: unknown environment variable"}},
		{"unknown env var fails consume too", []string{"consume", "-count", "1"}, []string{"MQTARGET_TOPC=x"}, 2,
			nil, []string{"MQTARGET_TOPC: unknown environment variable"}},
		{"embedded 0 disables the default broker", []string{"-nsq.embedded", "0"}, nil, 2,
			nil, []string{"nsq.hosts:", "not enabled"}},
		{"embedded 0 beside another broker", []string{"-print-config", "-nsq.embedded", "0", "-broker", "stomp"}, nil, 0,
			[]string{"embedded: 0"}, nil},
		{"missing config file", []string{"-config", "/nonexistent/mqtarget.yaml"}, nil, 2, nil, []string{"/nonexistent/mqtarget.yaml"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cmd, stdout, stderr := command(t, c.args...)
			cmd.Env = append(cmd.Env, c.env...)
			err := cmd.Run()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != c.exitCode {
				t.Fatalf("exit code %d, want %d\nstdout: %s\nstderr: %s", code, c.exitCode, stdout, stderr)
			}
			for _, want := range c.stdout {
				if !strings.Contains(stdout.String(), want) {
					t.Errorf("stdout lacks %q:\n%s", want, stdout)
				}
			}
			for _, want := range c.stderr {
				if !strings.Contains(stderr.String(), want) {
					t.Errorf("stderr lacks %q:\n%s", want, stderr)
				}
			}
		})
	}
}
