# shellcheck shell=bash
# What the benchmark scripts read of a process they measure and of wrk's output (scripts/bench.sh,
# scripts/bench-at-once.sh, scripts/load-vs-wrk.sh, scripts/lib/anchor-bench.sh). Source it.

# cpu_ticks PID: user+system CPU time of PID so far, in clock ticks: fields 14 and 15 of
# /proc/PID/stat, counted after the "(comm)", which may hold spaces.
cpu_ticks() { awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; }

# wrk_2xx FILE: the 2xx answers in wrk's output in FILE: its requests less its Non-2xx count.
wrk_2xx() { awk '/requests in/ {n = $1} /Non-2xx/ {bad = $NF} END {print n - bad}' "$1"; }
