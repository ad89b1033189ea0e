#!/usr/bin/env bash
# tests/test_cuda_mock_tsan.sh - the CUDA device's host code and the CUDA and NCCL test doubles
# under ThreadSanitizer (make test): build/mock-tsan/<name> (tests/cuda_mock/*.c, the
# programs and zero.h built with -fsanitize=thread; the kernels' emulator is not
# instrumented, its fibers are one OS thread's) in the double's asynchronous mode, where the
# comm thread, the stream workers and the NCCL double's ranks run at once: test_device,
# cuda_mock_streams, test_nccl, cuda_mock_zpp, train_mlp --device cuda and cuda_mock_staging
# must finish with no ThreadSanitizer report. Apart from tests/test_cuda_mock.sh (make test
# builds both scripts' programs first: make test-progs), so the two run side by side.
# ZERO_MOCK_TSAN=0 leaves it out (a SKIP line). Where the CUDA or NCCL headers are missing
# there is nothing to build: one SKIP line says so.
set -u
cd "$(dirname "$0")/.." || exit 1
BUILD=${BUILD:-build}
mkdir -p "$BUILD/logs"
if [ "$(make --no-print-directory -s BUILD="$BUILD" mock-available 2>/dev/null)" != 1 ]; then
    echo "SKIP cuda_mock_tsan: the CUDA or NCCL headers are missing (make mock-available), nothing to build"
    exit 0
fi
JOBS=${ZERO_JOBS:-$(nproc 2>/dev/null || echo 2)}
export ZERO_CUDA_MOCK_LEAKS=1
fails=0
fail() { echo "FAIL $1"; fails=$((fails + 1)); }
ARGS="--stage 3 --ranks 2 --steps 20 --hidden 96 --layers 3 --batch 24 --clip 1.0 --wd 0.01"

# ThreadSanitizer over the async double (ZERO_MOCK_TSAN=0: left out, slow to build)
if [ "${ZERO_MOCK_TSAN:-1}" = 1 ]; then
    if ! make --no-print-directory -j"$JOBS" BUILD="$BUILD" "$BUILD/mock-tsan/test_device" "$BUILD/mock-tsan/cuda_mock_streams" \
            "$BUILD/mock-tsan/test_nccl" "$BUILD/mock-tsan/train_mlp" "$BUILD/mock-tsan/cuda_mock_zpp" "$BUILD/mock-tsan/cuda_mock_staging" \
            >"$BUILD/logs/cuda_mock_tsan_build.log" 2>&1; then
        fail "mock_tsan_build: see $BUILD/logs/cuda_mock_tsan_build.log"
    else
        for prog in test_device cuda_mock_streams test_nccl cuda_mock_zpp "train_mlp --device cuda $ARGS --quiet"; do
            name=${prog%% *}
            out=$(ZERO_CUDA_MOCK_ASYNC=1 ZERO_CUDA_MOCK_DEVICES=4 timeout -k 5 600 "$BUILD/mock-tsan/"$prog 2>&1); rc=$?
            if [ "$rc" -eq 0 ] && ! printf '%s\n' "$out" | grep -q -e '^FAIL ' -e 'WARNING: ThreadSanitizer'; then
                echo "PASS mock_tsan_$name"
            else
                fail "mock_tsan_$name: exit $rc"
                printf '%s\n' "$out" | grep -E -A8 -e '^FAIL ' -e 'WARNING: ThreadSanitizer' | head -n 30
            fi
        done
    fi
else
    echo "SKIP mock_tsan: ZERO_MOCK_TSAN=0 left out the double under ThreadSanitizer (build/mock-tsan/)"
fi
#    the pipelined copies (tests/cuda_mock/staging.c)
if [ "${ZERO_MOCK_TSAN:-1}" = 1 ]; then
    if ! make --no-print-directory -j"$JOBS" BUILD="$BUILD" "$BUILD/mock-tsan/cuda_mock_staging" >>"$BUILD/logs/cuda_mock_tsan_build.log" 2>&1; then
        fail "mock_tsan_staging_build: see $BUILD/logs/cuda_mock_tsan_build.log"
    else
        out=$(ZERO_CUDA_MOCK_ASYNC=1 timeout -k 5 600 "$BUILD/mock-tsan/cuda_mock_staging" 2>&1); rc=$?
        if [ "$rc" -eq 0 ] && ! printf '%s\n' "$out" | grep -q -e '^FAIL ' -e 'WARNING: ThreadSanitizer'; then
            echo "PASS mock_tsan_staging"
        else
            fail "mock_tsan_staging: exit $rc"
            printf '%s\n' "$out" | grep -E -A8 -e '^FAIL ' -e 'WARNING: ThreadSanitizer' | head -n 30
        fi
    fi
fi
[ "$fails" -eq 0 ]
