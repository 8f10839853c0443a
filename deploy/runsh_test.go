package deploy_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fakeKubectl stands in for kubectl: it logs each call, answers `get job` with the completions,
// `wait --for=condition=complete` at once (the failed wait blocks until run.sh kills it), and `logs`
// with the file log-I of the index in its selector: what a worker printed, stdout and stderr mixed.
const fakeKubectl = `#!/usr/bin/env bash
echo "$*" >>"$FAKE/calls"
case "$1 $2" in
"get job") echo 2 ;;
"wait --for=condition=failed") exec sleep 30 ;;
"logs --tail=-1") i=${4##*job-completion-index=}; cat "$FAKE/log-$i" ;;
esac
`

// fakeMqtarget records the arguments `mqtarget report` is given.
const fakeMqtarget = `#!/usr/bin/env bash
printf '%s\n' "$@" >"$FAKE/report-args"
`

// TestRunScript runs deploy/kubernetes/load/run.sh against a fake kubectl and mqtarget: it creates the
// start-time ConfigMap LEAD seconds ahead before applying the Job, reads every index's log with the
// pod selector kubectl logs needs (--tail=-1: with -l it would keep 10 lines), drops mqtarget load's
// stderr lines, and gives mqtarget report one JSON file per shard.
func TestRunScript(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	fake := t.TempDir()
	for name, text := range map[string]string{"kubectl": fakeKubectl, "mqtarget": fakeMqtarget} {
		if err := os.WriteFile(filepath.Join(fake, name), []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	results := map[string]string{
		"0": "{\n  \"shard\": \"0/2\",\n  \"requests\": 10\n}\n",
		"1": "{\"shard\": \"1/2\", \"requests\": 9}\n",
	}
	for i, r := range results {
		// A worker over -max-error-rate prints its result, then this on stderr.
		log := r + "mqtarget load: failed: 2 of 9 requests answered non-2xx\n"
		if err := os.WriteFile(filepath.Join(fake, "log-"+i), []byte(log), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(t.TempDir(), "results")
	cmd := exec.Command("bash", "kubernetes/load/run.sh", out)
	cmd.Env = append(os.Environ(), "FAKE="+fake, "KUBECTL="+filepath.Join(fake, "kubectl"),
		"MQTARGET="+filepath.Join(fake, "mqtarget"), "LEAD=60", "REPORT_ARGS=-o json")
	before := time.Now().Unix()
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("run.sh: %v\n%s", err, b)
	}
	calls, err := os.ReadFile(filepath.Join(fake, "calls"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(calls)), "\n")
	create, apply := -1, -1
	for i, l := range lines {
		if rest, ok := strings.CutPrefix(l, "create configmap mqtarget-load-start --from-literal=start-at="); ok {
			create = i
			at, err := strconv.ParseInt(rest, 10, 64)
			if err != nil || at < before+60 || at > time.Now().Unix()+60 {
				t.Errorf("start-at %q: want now + LEAD (60 s), in Unix seconds", rest)
			}
		}
		if strings.HasPrefix(l, "apply -f ") && strings.HasSuffix(l, "mqtarget-load-job.yaml") {
			apply = i
		}
	}
	if create < 0 || apply < create {
		t.Errorf("calls %q: want the ConfigMap created, then the Job applied", lines)
	}
	args, err := os.ReadFile(filepath.Join(fake, "report-args"))
	if err != nil {
		t.Fatalf("mqtarget report was not run: %v", err)
	}
	got := strings.Split(strings.TrimSpace(string(args)), "\n")
	want := []string{"report", "-o", "json", filepath.Join(out, "shard-0.json"), filepath.Join(out, "shard-1.json")}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("mqtarget %q, want %q", got, want)
	}
	for i, f := range want[3:] {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !json.Valid(data) || string(data) != results[strconv.Itoa(i)] {
			t.Errorf("%s: %q, want the worker's JSON alone, %q", f, data, results[strconv.Itoa(i)])
		}
	}
}
