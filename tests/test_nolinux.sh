#!/usr/bin/env bash
# tests/test_nolinux.sh - the POSIX build without Linux-only calls (ZERO_NO_LINUX, which
# zero.h defines itself off Linux): no io_uring, no O_DIRECT, no madvise, no
# pthread_condattr_setclock (timeouts on CLOCK_REALTIME), no posix_fallocate (ftruncate).
# Built here on Linux (build/nolinux/, make's cc_nolinux) so that the fallback code runs:
#   - nolinux_uring_refused: ZERO_IO_URING with ZERO_NO_LINUX is an #error that says why;
#   - nolinux_symbols: the programs import none of those calls (nm -u);
#   - nolinux_<program>: test_offload (the NVMe tier's files and the threads engine),
#     test_ckpt (checkpoint files, atomic renames) and test_errors (every collective's
#     timeout, on the realtime clock), each passing as the default build does.
# Run from the repository root.
set -u
BUILD=${BUILD:-build}
PROGS=(test_offload test_ckpt test_errors)
LOG=$BUILD/logs/nolinux_build.log
mkdir -p "$BUILD/logs"
JOBS=${ZERO_JOBS:-$(nproc 2>/dev/null || echo 2)}
if ! make --no-print-directory -j"$JOBS" BUILD="$BUILD" "${PROGS[@]/#/$BUILD/nolinux/}" >"$LOG" 2>&1; then
    echo "FAIL nolinux_build: make of build/nolinux/ failed (see $LOG)"
    tail -n 20 "$LOG"
    exit 1
fi
failed=0
# ZERO_IO_URING is Linux's: with ZERO_NO_LINUX the build stops with a sentence, not a link error
out=$(printf '#define ZERO_IMPLEMENTATION\n#include "zero.h"\n' | ${CC:-gcc} -x c -std=c99 -pthread -I. -DZERO_NO_LINUX \
      -DZERO_IO_URING -fsyntax-only - 2>&1); rc=$?
if [ $rc -ne 0 ] && printf '%s' "$out" | grep -q 'ZERO_IO_URING is Linux'; then
    echo "PASS nolinux_uring_refused (#error: ZERO_IO_URING is Linux's)"
else
    echo "FAIL nolinux_uring_refused: exit $rc: $(printf '%s' "$out" | grep -m1 error)"; failed=1
fi
bad=""
for p in "${PROGS[@]}"; do
    s=$(nm -u "$BUILD/nolinux/$p" 2>/dev/null | grep -oE 'posix_fallocate|madvise|pthread_condattr_setclock|io_uring_[a-z_]+' | sort -u | tr '\n' ' ')
    [ -n "$s" ] && bad="$bad $p imports: $s;"
done
if ! command -v nm >/dev/null 2>&1; then echo "SKIP nolinux_symbols: nm not installed"
elif [ -z "$bad" ]; then echo "PASS nolinux_symbols (${PROGS[*]}: no posix_fallocate, madvise, pthread_condattr_setclock, io_uring)"
else echo "FAIL nolinux_symbols:$bad"; failed=1; fi
for p in "${PROGS[@]}"; do
    out=$(timeout 300 "$BUILD/nolinux/$p" 2>&1); rc=$?
    last=$(printf '%s\n' "$out" | tail -n 1)
    if [ $rc -eq 0 ] && printf '%s' "$last" | grep -qE '^[0-9]+ passed, 0 failed'; then
        echo "PASS nolinux_$p ($last)"
    else
        echo "FAIL nolinux_$p: exit $rc: $(printf '%s\n' "$out" | grep -m3 '^FAIL' | tr '\n' ' ') $last"
        failed=1
    fi
done
exit $failed
