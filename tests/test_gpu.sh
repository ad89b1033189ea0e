#!/usr/bin/env bash
# tests/test_gpu.sh - `make test-gpu`: the checks that need a GPU, as one prepared run of a
# few minutes (the GPU machines are lent for minutes, not hours). Not run by `make test`.
#
#   1. builds only what it runs with CUDA=1 (zero_kernels.o, test_device, train_mlp, tests/gpu/*);
#   2. build/cuda/test_device: the CUDA device against the CPU device, stages 0-3 at 1-4
#      ranks on the local comm over one GPU (the optimizer, norm and sums are bitwise);
#   3. build/cuda/gpu_*: the kernels against the CPU reference, NCCL (world 1, more with
#      more GPUs), the fused AdamW's bandwidth against a device-to-device copy (ratio=);
#   4. train_mlp --device cuda at stage 3 on 2 ranks: it learns, and its loss matches the
#      same device path on the CPU (--device emu) to within cuBLAS's rounding.
# Without a GPU it says so and exits 0 having run nothing. Every program's output is
# kept in build/logs/gpu_*.log; the last line is "N passed, N failed, N skipped". SKIP
# lines are counted as skipped, but a program that runs nothing here (only SKIP lines:
# CUDA sees no GPU although nvidia-smi does) is a failure: this is the run that needs one.
# So is a test_device whose CUDA cases did not run, and a tests/gpu program that cannot
# use the GPU for another reason than "no device" (a driver/runtime mismatch: gpu.h).
set -u
cd "$(dirname "$0")/.." || exit 1
BUILD=${BUILD:-build}
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "test_gpu: no GPU found (nvidia-smi failed or missing); no GPU tests were run"
    exit 0
fi
nvidia-smi -L
mkdir -p "$BUILD/logs"
gpu_progs=()
for src in tests/gpu/*.c; do [ -e "$src" ] && gpu_progs+=("$BUILD/cuda/gpu_$(basename "$src" .c)"); done
t0=$(date +%s)
if ! make -j"$(nproc)" CUDA=1 "$BUILD/cuda/zero_kernels.o" "$BUILD/cuda/test_device" "$BUILD/cuda/train_mlp" \
        "$BUILD/train_mlp" ${gpu_progs[@]+"${gpu_progs[@]}"} >"$BUILD/logs/gpu_build.log" 2>&1; then
    tail -n 30 "$BUILD/logs/gpu_build.log"
    echo "test_gpu: make CUDA=1 failed"; echo "0 passed, 1 failed, 0 skipped"; exit 1
fi
echo "test_gpu: built in $(( $(date +%s) - t0 )) s"

pass=0 fail=0 skip=0
run() {   # run NAME CMD...: counts its PASS/FAIL/SKIP lines; a crash or no PASS/FAIL is one failure
    local name=$1; shift
    local log="$BUILD/logs/gpu_$name.log" rc np nf ns
    timeout -k 5 240 "$@" >"$log" 2>&1; rc=$?
    np=$(grep -c '^PASS ' "$log"); nf=$(grep -c '^FAIL ' "$log"); ns=$(grep -c '^SKIP ' "$log")
    grep -E '^(FAIL |SKIP|ratio=|[a-z_]+_GBps=|adamw|copy)' "$log" | sed "s|^|  $name: |"
    if [ "$rc" -ne 0 ] && [ "$nf" -eq 0 ]; then echo "FAIL $name: exit $rc"; tail -n 15 "$log"; nf=1; fi
    if [ "$rc" -eq 0 ] && [ "$np" -eq 0 ] && [ "$nf" -eq 0 ]; then echo "FAIL $name: no PASS or FAIL line"; nf=1; fi
    echo "$name: $np passed, $nf failed, $ns skipped"
    pass=$((pass + np)); fail=$((fail + nf)); skip=$((skip + ns))
}
run test_device "$BUILD/cuda/test_device"
# test_device passes on its CPU and EMU cases alone: here its CUDA cases must have run
if ! grep -q '^PASS cuda_vs_cpu$' "$BUILD/logs/gpu_test_device.log"; then
    echo "FAIL test_device_cuda_ran: nvidia-smi sees a GPU but test_device's CUDA cases did not pass or were skipped:"
    grep -E '^(SKIP|FAIL) cuda' "$BUILD/logs/gpu_test_device.log" | head -n 5
    fail=$((fail + 1))
fi
for p in ${gpu_progs[@]+"${gpu_progs[@]}"}; do run "$(basename "$p")" "$p"; done

# train_mlp on the GPU vs the same device path on the CPU
M=(--hidden 256 --layers 4 --batch 64 --steps 60 --quiet --stage 3 --ranks 2 --dtype bf16)
if "$BUILD/cuda/train_mlp" "${M[@]}" --device cuda >"$BUILD/logs/gpu_train_mlp_cuda.log" 2>&1 &&
   "$BUILD/train_mlp" "${M[@]}" --device emu >"$BUILD/logs/gpu_train_mlp_emu.log" 2>&1; then
    lc=$(sed -n 's/^final loss=\([^ ]*\).*/\1/p' "$BUILD/logs/gpu_train_mlp_cuda.log")
    le=$(sed -n 's/^final loss=\([^ ]*\).*/\1/p' "$BUILD/logs/gpu_train_mlp_emu.log")
    echo "  train_mlp: cuda $(tail -n 1 "$BUILD/logs/gpu_train_mlp_cuda.log")"
    echo "  train_mlp: emu  $(tail -n 1 "$BUILD/logs/gpu_train_mlp_emu.log")"
    if [ -n "$lc" ] && [ -n "$le" ] && awk "BEGIN { d = $lc - $le; exit !(d < 0.02 && d > -0.02 && $lc < 2.5) }"; then
        echo "PASS train_mlp_cuda_vs_emu"; pass=$((pass + 1))
    else echo "FAIL train_mlp_cuda_vs_emu: loss cuda '$lc' vs emu '$le'"; fail=$((fail + 1)); fi
else
    echo "FAIL train_mlp_cuda: $(tail -n 3 "$BUILD/logs/gpu_train_mlp_cuda.log" "$BUILD/logs/gpu_train_mlp_emu.log")"
    fail=$((fail + 1))
fi
echo "test_gpu: $(( $(date +%s) - t0 )) s in all"
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
