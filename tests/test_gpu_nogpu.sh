#!/usr/bin/env bash
# tests/test_gpu_nogpu.sh - `make test-gpu` on a machine without a GPU (make test): it must
# stop within a minute, with a FAIL line that says there is no GPU, exit non-zero, build
# nothing, and still leave its summary in ZERO_GPU_OUT. Where a GPU is present, a stand-in
# nvidia-smi that lists none (first on PATH) makes the machine look GPU-less.
set -u
cd "$(dirname "$0")/.." || exit 1
BUILD=${BUILD:-build}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/zero_gpu_nogpu.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin" "$tmp/out"
printf '#!/bin/sh\necho "NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver." >&2\nexit 9\n' \
    >"$tmp/bin/nvidia-smi"
chmod +x "$tmp/bin/nvidia-smi"
before=$(ls "$BUILD/cuda" 2>/dev/null | wc -l)
t0=$(date +%s%N)
out=$(PATH="$tmp/bin:$PATH" ZERO_GPU_OUT="$tmp/out" timeout -k 5 90 make --no-print-directory BUILD="$BUILD" test-gpu 2>&1)
rc=$?
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
after=$(ls "$BUILD/cuda" 2>/dev/null | wc -l)
fails=0
if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] && printf '%s\n' "$out" | grep -q '^FAIL test_gpu_no_gpu: .*GPU'; then
    echo "PASS gpu_nogpu_fails_clearly (exit $rc)"
else
    echo "FAIL gpu_nogpu_fails_clearly: exit $rc: $(printf '%s\n' "$out" | tail -n 5)"
    fails=$((fails + 1))
fi
if [ "$ms" -lt 60000 ]; then echo "PASS gpu_nogpu_within_a_minute ($ms ms)"
else echo "FAIL gpu_nogpu_within_a_minute: $ms ms"; fails=$((fails + 1)); fi
if [ "$after" -eq "$before" ]; then echo "PASS gpu_nogpu_built_nothing"
else echo "FAIL gpu_nogpu_built_nothing: $BUILD/cuda went from $before to $after files"; fails=$((fails + 1)); fi
if grep -q '^FAIL test_gpu_no_gpu' "$tmp/out/summary.txt" 2>/dev/null && grep -q '^0 passed, 1 failed' "$tmp/out/summary.txt" &&
   grep -q 'NCCL from' "$tmp/out/summary.txt"; then
    echo "PASS gpu_nogpu_summary"
else
    echo "FAIL gpu_nogpu_summary: ZERO_GPU_OUT/summary.txt lacks the FAIL line, the counts or the probe"
    fails=$((fails + 1))
fi
[ "$fails" -eq 0 ]
