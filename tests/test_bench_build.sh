#!/usr/bin/env bash
# tests/test_bench_build.sh - the benchmarks (tests/bench/*.c, make bench) still compile:
# they reach into zero.h's internals, so a change there can break them while every test
# passes. One PASS/FAIL line per benchmark; nothing is run (benchmarks are not tests).
set -u
cd "$(dirname "$0")/.." || exit 1
BUILD=${BUILD:-build}
mkdir -p "$BUILD/logs"
failed=0
for src in tests/bench/*.c; do
    [ -e "$src" ] || continue
    target="$BUILD/bench_$(basename "$src" .c | sed 's/^bench_//')"
    if make --no-print-directory "$target" >"$BUILD/logs/build_$(basename "$target").log" 2>&1; then
        echo "PASS builds_$(basename "$target")"
    else
        echo "FAIL builds_$(basename "$target"): $(grep -m1 'error:' "$BUILD/logs/build_$(basename "$target").log")"
        failed=1
    fi
done
exit $failed
