#!/usr/bin/env bash
# Runs every fuzz target of the module (every `func FuzzXxx(f *testing.F)` in a _test.go file) for a
# fixed budget each, one after the other. The seed corpora (f.Add and testdata/fuzz/) run first, as
# part of each target's run. A failing input is written to the package's testdata/fuzz/<Target>/ by go
# test; commit it with the fix, so it stays a regression case.
#
#   scripts/fuzz.sh [package-pattern]   default ./...
#
# Environment: FUZZTIME [20000x] budget per target (a go test -fuzztime value: 20000x, 10s, 1m). A count
#   is the default: with a duration, Go 1.26's fuzz coordinator can end a target that found nothing with
#   "context deadline exceeded" when the time runs out on a busy machine (go.dev/issue/75804, fixed in
#   Go 1.27); a count has no deadline to race. A real finding always says "Failing input written to".
set -euo pipefail

cd "$(dirname "$0")/.."
readonly FUZZTIME="${FUZZTIME:-20000x}"
pattern="${1:-./...}"

failed=()
count=0
bin=$(mktemp -d "${TMPDIR:-/tmp}/mqtarget-fuzz.XXXXXX")
trap 'rm -rf "$bin"' EXIT
cache=$(go env GOCACHE)/fuzz
# go list names each package with its directory; the targets are found in its test files. Each
# package's instrumented test binary is built once and runs its targets one after the other, as go
# test -fuzz would (in the package's directory, with go test's corpus cache): one link per package,
# not per target (a new machine's CI run spent 249 s here, much of it linking).
while IFS=' ' read -r pkg dir; do
    targets=$(grep -ho '^func Fuzz[A-Za-z0-9_]*(' "$dir"/*_test.go 2>/dev/null | sed 's/^func //; s/($//' | sort -u || true)
    [[ -n $targets ]] || continue
    if ! go test -c -o "$bin/fuzz.test" -fuzz . "$pkg"; then
        failed+=("$pkg (build)")
        continue
    fi
    for t in $targets; do
        count=$((count + 1))
        echo "== $pkg $t ($FUZZTIME)"
        if ! (cd "$dir" && "$bin/fuzz.test" -test.run '^$' -test.fuzz "^${t}\$" -test.fuzztime "$FUZZTIME" \
            -test.fuzzcachedir "$cache/$pkg"); then
            failed+=("$pkg $t")
        fi
    done
done < <(go list -f '{{.ImportPath}} {{.Dir}}' "$pattern")

if ((count == 0)); then
    echo "fuzz.sh: no fuzz targets in $pattern" >&2
    exit 1
fi
if ((${#failed[@]} > 0)); then
    printf 'fuzz.sh: FAILED %s\n' "${failed[@]}" >&2
    exit 1
fi
echo "fuzz.sh: $count targets, $FUZZTIME each: nothing found"
