#!/usr/bin/env bash
# Runs the sharded load of mqtarget-load-job.yaml once and merges its results:
#   1. deletes a previous run's Job and start-time ConfigMap;
#   2. creates the ConfigMap mqtarget-load-start with start-at = now + LEAD seconds (Unix seconds,
#      the same for every worker) and applies the Job;
#   3. waits for the Job to complete or fail;
#   4. writes each worker's JSON result (its log, without the "mqtarget load: ..." lines of its
#      stderr) to OUT/shard-I.json and runs `mqtarget report` on them.
#
# Usage: deploy/kubernetes/load/run.sh [OUT]        (OUT defaults to ./mqtarget-load-results)
#
# Environment (defaults):
#   LEAD        90                 seconds between now and the start; more than the pods need to be
#                                  scheduled and running (image pull included), at most 86400
#   TIMEOUT     30m                how long to wait for the Job (kubectl wait's --timeout)
#   MQTARGET    mqtarget           the local binary that merges (go install ./cmd/mqtarget)
#   REPORT_ARGS -o table           what `mqtarget report` is given before the files
#   KUBECTL     kubectl            with its usual context and namespace
set -euo pipefail

readonly JOB=mqtarget-load START=mqtarget-load-start
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
OUT=${1:-mqtarget-load-results}
LEAD=${LEAD:-90}
TIMEOUT=${TIMEOUT:-30m}
MQTARGET=${MQTARGET:-mqtarget}
REPORT_ARGS=${REPORT_ARGS:--o table}
KUBECTL=${KUBECTL:-kubectl}

if ! [[ $LEAD =~ ^[0-9]+$ ]] || ((LEAD < 5 || LEAD > 86400)); then
	echo "run.sh: LEAD must be 5..86400 seconds, got $LEAD" >&2
	exit 2
fi

$KUBECTL delete job "$JOB" --ignore-not-found --wait=true
$KUBECTL delete configmap "$START" --ignore-not-found
start_at=$(($(date +%s) + LEAD))
$KUBECTL create configmap "$START" --from-literal=start-at="$start_at"
$KUBECTL apply -f "$HERE/mqtarget-load-job.yaml"
n=$($KUBECTL get job "$JOB" -o 'jsonpath={.spec.completions}')
echo "run.sh: $n workers start at $(date -u -d "@$start_at" +%FT%TZ 2>/dev/null || echo "$start_at")" >&2

# Complete or Failed, whichever comes first; a failed Job's logs are collected all the same (a
# worker over -max-error-rate exits 1 after printing its result).
$KUBECTL wait --for=condition=complete "job/$JOB" --timeout="$TIMEOUT" &
complete=$!
$KUBECTL wait --for=condition=failed "job/$JOB" --timeout="$TIMEOUT" &
failed=$!
wait -n "$complete" "$failed" || true
kill "$complete" "$failed" 2>/dev/null || true

mkdir -p "$OUT"
files=()
for ((i = 0; i < n; i++)); do
	f="$OUT/shard-$i.json"
	$KUBECTL logs --tail=-1 -l "batch.kubernetes.io/job-name=$JOB,batch.kubernetes.io/job-completion-index=$i" |
		grep -v '^mqtarget load:' >"$f" || true
	if [[ ! -s $f ]]; then
		echo "run.sh: shard $i left no result in its log (kubectl describe job $JOB)" >&2
	fi
	files+=("$f")
done
# shellcheck disable=SC2086 # REPORT_ARGS is a list of arguments
"$MQTARGET" report $REPORT_ARGS "${files[@]}"
