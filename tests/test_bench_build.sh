#!/usr/bin/env bash
# tests/test_bench_build.sh - the benchmarks (tests/bench/*.c, make bench) still compile:
# they reach into zero.h's internals, so a change there can break them while every test
# passes. One PASS/FAIL line per benchmark; nothing is run (benchmarks are not tests).
# They build at -O0 in $BUILD/bench-check/ (make bench builds them at CFLAGS in $BUILD/), in
# one make, as many at a time as there are cores (ZERO_JOBS); -k, so one that fails does not
# stop the others; each is then up to date (make -q) or its errors are shown.
set -u
cd "$(dirname "$0")/.." || exit 1
BUILD=${BUILD:-build}
mkdir -p "$BUILD/logs"
LOG=$BUILD/logs/build_benches.log
JOBS=${ZERO_JOBS:-$(nproc 2>/dev/null || echo 2)}
failed=0
targets=() srcs=()
for src in tests/bench/*.c; do
    [ -e "$src" ] || continue
    srcs+=("$src")
    targets+=("$BUILD/bench-check/bench_$(basename "$src" .c | sed 's/^bench_//')")
done
[ ${#targets[@]} -gt 0 ] || { echo "SKIP builds_benches: no tests/bench/*.c"; exit 0; }
make --no-print-directory -k -j"$JOBS" BUILD="$BUILD" "${targets[@]}" >"$LOG" 2>&1
for i in "${!targets[@]}"; do
    t=${targets[$i]} src=${srcs[$i]}
    if [ -x "$t" ] && make --no-print-directory -q BUILD="$BUILD" "$t" >/dev/null 2>&1; then
        echo "PASS builds_$(basename "$t")"
    else
        echo "FAIL builds_$(basename "$t"): $(grep -m1 -e "^$src:.*error" -e "$(basename "$t").*Error" "$LOG")"
        failed=1
    fi
done
exit $failed
