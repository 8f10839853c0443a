#!/usr/bin/env bash
# Builds a real nsqd (and nsqlookupd) of the pinned version from the Go module proxy into the cache,
# and prints the nsqd path. nsq's apps need nsq's own `replace` of judwhite/go-svc, so they are built
# in a small module of their own, outside mqtarget's go.mod.
#
#   scripts/nsqd.sh [build]     build when missing, print the nsqd path
#
# Environment: MQTARGET_CACHE [$HOME/.cache/mqtarget]
set -euo pipefail

readonly NSQ_VERSION="v1.3.0"
readonly GO_SVC_REPLACE="github.com/mreiferson/go-svc v1.2.2-0.20210815184239-7a96e00010f6"
CACHE_DIR="${MQTARGET_CACHE:-$HOME/.cache/mqtarget}"
DIR="$CACHE_DIR/nsq-$NSQ_VERSION"

build() {
    if [[ -x "$DIR/bin/nsqd" && -x "$DIR/bin/nsqlookupd" ]] && "$DIR/bin/nsqd" --version | grep -q "nsqd ${NSQ_VERSION}"; then
        echo "$DIR/bin/nsqd"
        return
    fi
    command -v go >/dev/null || { echo "nsqd.sh: go is required" >&2; exit 1; }
    local mod="$DIR/module"
    mkdir -p "$mod" "$DIR/bin"
    cat >"$mod/go.mod" <<GOMOD
module mqtarget.local/nsq-apps

go 1.22

require github.com/nsqio/nsq ${NSQ_VERSION}

replace github.com/judwhite/go-svc => ${GO_SVC_REPLACE}
GOMOD
    cat >"$mod/tools.go" <<'GO'
//go:build tools

package tools

import (
	_ "github.com/nsqio/nsq/apps/nsqd"
	_ "github.com/nsqio/nsq/apps/nsqlookupd"
)
GO
    echo "nsqd.sh: building nsqd ${NSQ_VERSION} into $DIR/bin" >&2
    (
        cd "$mod"
        export GOFLAGS="${GOFLAGS:-} -mod=mod"
        go mod tidy >&2
        go build -o "$DIR/bin/" github.com/nsqio/nsq/apps/nsqd github.com/nsqio/nsq/apps/nsqlookupd >&2
    )
    echo "$DIR/bin/nsqd"
}

case "${1:-build}" in
    build) build ;;
    *) echo "usage: $0 [build]" >&2; exit 2 ;;
esac
