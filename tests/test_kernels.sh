#!/usr/bin/env bash
# tests/test_kernels.sh - zero_kernels.cu, the kernels nvcc compiles, run here without a GPU
# (make test, and alone: make test-kernels). tests/kemu is a CPU grid emulator: the real
# kernels, rewritten only where the host compiler cannot parse CUDA (<<<...>>> and __shared__,
# tests/kemu/rewrite.sh), run with a fiber per CUDA thread, real __syncthreads and warp
# shuffles, and the checks a first GPU run would make (tests/kemu/kemu.h). They sit behind
# the CUDA test double, so the launchers and the stream semantics are the real ones too.
#   - build/mock/kemu_checks (tests/kemu/checks.cu): every check of the emulator provoked by
#     a kernel with that fault (misaligned vector loads, partial or divergent __syncthreads,
#     bad shuffle masks, widths and sources, shared-memory races, uninitialized reads and
#     out-of-bounds indices, a bad launch configuration, a host pointer), and correct kernels
#     with their defined results; again under ASan+UBSan (build/kemu-asan/), plus a kernel
#     writing past a device allocation, which must be ASan's heap-buffer-overflow;
#   - build/mock/gpu_kernels (tests/gpu/kernels.c): every launcher bitwise against its CPU
#     reference, at sizes that reach every path and one input misaligned at a time; in the
#     double's synchronous mode, in its asynchronous mode, with the grid capped at 3 blocks
#     (ZERO_KEMU_MAX_GRID: every grid-stride loop wraps many times), each with another
#     block order (ZERO_KEMU_SEED), and under ASan+UBSan (device memory allocated exactly to
#     size, so an out-of-bounds global access is a report);
#   - build/mock/gpu_bench_adamw: the bandwidth benchmark's host code, small (its figure
#     means nothing here: ZERO_BENCH_NO_VERDICT=1).
# Where the CUDA or NCCL headers or a C++ compiler are missing: one SKIP line.
set -u
cd "$(dirname "$0")/.." || exit 1
BUILD=${BUILD:-build}
mkdir -p "$BUILD/logs"
LOG=$BUILD/logs/kernels_build.log

if [ "$(make --no-print-directory -s BUILD="$BUILD" mock-available 2>/dev/null)" != 1 ]; then
    echo "SKIP kernels: the CUDA or NCCL headers or a C++ compiler are missing (make mock-available), nothing to build"
    exit 0
fi
if ! make --no-print-directory -j"${ZERO_JOBS:-$(nproc 2>/dev/null || echo 2)}" BUILD="$BUILD" "$BUILD/mock/kemu_checks" "$BUILD/mock/gpu_kernels" \
        "$BUILD/mock/gpu_bench_adamw" "$BUILD/kemu-asan/kemu_checks" "$BUILD/kemu-asan/gpu_kernels" >"$LOG" 2>&1; then
    echo "FAIL kernels_build: make of the emulated kernels' programs failed (see $LOG)"
    tail -n 20 "$LOG"
    exit 1
fi
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export ZERO_CUDA_MOCK_LEAKS=1
fails=0
fail() { echo "FAIL $1"; fails=$((fails + 1)); }

# run PREFIX COMMAND...: its PASS / FAIL / SKIP lines, prefixed; a non-zero exit is a failure
run() {
    local P=$1 out rc
    shift
    out=$("$@" 2>&1); rc=$?
    printf '%s\n' "$out" | grep -E '^(PASS|FAIL|SKIP) ' | sed "s/^\\(PASS\\|FAIL\\|SKIP\\) /\\1 ${P}/"
    if printf '%s\n' "$out" | grep -q '^FAIL '; then
        fails=$((fails + 1))
        printf '%s\n' "$out" | grep -E '^kemu:|^cuda_mock:' | head -n 5
    elif [ "$rc" -ne 0 ]; then
        fail "${P}exit: $* exited $rc"
        printf '%s\n' "$out" | grep -v -E '^(PASS|SKIP) ' | tail -n 20
    elif ! printf '%s\n' "$out" | grep -q '^PASS '; then
        fail "${P}ran: $* printed no PASS line"
    fi
}

run kemu_ "$BUILD/mock/kemu_checks"
run kemu_asan_ "$BUILD/kemu-asan/kemu_checks"
out=$("$BUILD/kemu-asan/kemu_checks" oob 2>&1); rc=$?
if [ "$rc" -ne 0 ] && printf '%s\n' "$out" | grep -q 'AddressSanitizer: heap-buffer-overflow'; then
    echo "PASS kemu_asan_global_out_of_bounds"
else
    fail "kemu_asan_global_out_of_bounds: a kernel writing past a device allocation was not ASan's report (exit $rc)"
    printf '%s\n' "$out" | tail -n 5
fi

run kernels_ "$BUILD/mock/gpu_kernels"
run kernels_async_ env ZERO_CUDA_MOCK_ASYNC=1 ZERO_KEMU_SEED=2 "$BUILD/mock/gpu_kernels"
run kernels_grid3_ env ZERO_KEMU_MAX_GRID=3 ZERO_KEMU_SEED=3 "$BUILD/mock/gpu_kernels"
run kernels_asan_ env ZERO_KEMU_SEED=4 "$BUILD/kemu-asan/gpu_kernels"

out=$(ZERO_BENCH_NO_VERDICT=1 ZERO_BENCH_N=300007 ZERO_BENCH_REPS=2 "$BUILD/mock/gpu_bench_adamw" 2>&1); rc=$?
if [ "$rc" -eq 0 ] && printf '%s\n' "$out" | grep -q '^PASS bench_adamw_ran' && printf '%s\n' "$out" | grep -q '^ratio='; then
    echo "PASS kernels_bench_adamw_host_code"
else
    fail "kernels_bench_adamw_host_code: build/mock/gpu_bench_adamw (exit $rc)"
    printf '%s\n' "$out" | tail -n 10
fi
[ "$fails" -eq 0 ]
