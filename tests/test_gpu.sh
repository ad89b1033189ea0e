#!/usr/bin/env bash
# tests/test_gpu.sh - `make test-gpu`: the one prepared command for a GPU machine (the GPU
# machines are lent for minutes: it finishes in under 8 minutes, the build included, and
# downloads nothing). Not run by `make test`.
#
#   0. a probe: the GPUs (nvidia-smi), nvcc, the host compiler, where NCCL and cuBLAS were
#      found (make gpu-probe). Without a GPU it stops here, at once, with a message and
#      exit 1: this is the run that needs one.
#   1. builds only what it runs, with CUDA=1 and every core, without -Werror (WERROR=: a
#      toolchain we never compiled with may warn);
#   2. build/cuda/test_device: the CUDA device against the CPU device, bitwise (stages 0-3
#      at worlds 1-4 as threads on one GPU, f32/bf16/f16, host offload, checkpoints);
#   3. build/cuda/gpu_kernels (every kernel against its CPU reference), gpu_nccl (the NCCL
#      comm against the local one at world 1, more with more GPUs; both reduce modes' bus
#      bandwidth: <collective>_<mode>_GBps=), gpu_bench_adamw (the fused AdamW's bandwidth
#      against a device-to-device copy: ratio=);
#   4. compute-sanitizer memcheck, racecheck, synccheck and initcheck over gpu_kernels and a
#      short training (train_mlp --device cuda, stage 3, 2 ranks), in parallel;
#   5. train_mlp --device cuda: two runs bitwise equal (--save-params), an asynchronous run
#      bitwise equal to one under CUDA_LAUNCH_BLOCKING=1, a non-blocking caller stream
#      (--nonblocking-stream) bitwise equal to the default stream, and the loss against
#      the same device path on the CPU (--device emu) within cuBLAS's rounding; the same
#      for ZeRO++ (--qwz --qgz --hpz 2, 4 ranks in nodes of 2): twice bitwise, vs emu;
#   6. build/bench_zpp (ZeRO++ vs stage 3 on modelled links, 8 local ranks) on this machine's
#      cores: its ratio= lines in the summary;
#   7. build/bench_comm, bench_step, bench_infinity and bench_nvme on this machine's cores and
#      disk (issue #15's numbers, which 2 cores and a virtio disk cannot show), each while
#      the whole stays under 8 minutes: their result lines in the summary.
# Any SKIP is a failure here (every check must run), so is a program that prints no PASS.
# Logs: build/logs/gpu_*.log. ZERO_GPU_OUT=DIR: the summary (summary.txt: the probe, every
# check's line, the counts) and the logs are copied there. Last line: "N passed, N failed,
# N skipped" (skipped is always 0: a skip is counted as failed).
set -u
cd "$(dirname "$0")/.." || exit 1
BUILD=${BUILD:-build}
OUT=${ZERO_GPU_OUT:-}
LOGS="$BUILD/logs"
mkdir -p "$LOGS"
[ -n "$OUT" ] && mkdir -p "$OUT"
t0=$(date +%s)
SUMMARY="$LOGS/gpu_summary.txt"
: >"$SUMMARY"
say() { printf '%s\n' "$*" | tee -a "$SUMMARY"; }
finish() {   # finish RC: the counts, the copy to ZERO_GPU_OUT, exit RC
    say "test_gpu: $(( $(date +%s) - t0 )) s in all"
    say "$pass passed, $fail failed, 0 skipped"
    if [ -n "$OUT" ]; then cp "$SUMMARY" "$OUT/summary.txt"; cp "$LOGS"/gpu_*.log "$OUT/" 2>/dev/null; fi
    exit "$1"
}
pass=0 fail=0

# ---- 0. the probe --------------------------------------------------------------------------
say "test_gpu: probe"
gpus=
if command -v nvidia-smi >/dev/null 2>&1; then
    gpus=$(timeout 30 nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader 2>&1) || gpus=
fi
if [ -n "$gpus" ]; then printf '%s\n' "$gpus" | sed 's/^/  gpu: /' | tee -a "$SUMMARY"; else say "  gpu: none"; fi
timeout 30 make --no-print-directory -s CUDA=1 BUILD="$BUILD" gpu-probe 2>&1 | sed 's/^/  /' | tee -a "$SUMMARY"
SANITIZER=$(timeout 30 make --no-print-directory -s CUDA=1 BUILD="$BUILD" gpu-sanitizer 2>/dev/null)
say "  compute-sanitizer: ${SANITIZER:-not found}"
if [ -z "$gpus" ]; then
    say "FAIL test_gpu_no_gpu: make test-gpu needs an NVIDIA GPU and its driver: nvidia-smi $(command -v nvidia-smi \
        >/dev/null 2>&1 && echo 'lists no GPU' || echo 'is not installed'); nothing was built or run"
    fail=1
    finish 1
fi

# ---- 1. the build ----------------------------------------------------------------------------
gpu_progs=()
for src in tests/gpu/*.c; do [ -e "$src" ] && gpu_progs+=("$BUILD/cuda/gpu_$(basename "$src" .c)"); done
if ! make -j"$(nproc)" --no-print-directory CUDA=1 WERROR= BUILD="$BUILD" "$BUILD/cuda/zero_kernels.o" \
        "$BUILD/cuda/test_device" "$BUILD/cuda/train_mlp" "$BUILD/train_mlp" "$BUILD/bench_zpp" \
        "$BUILD/bench_comm" "$BUILD/bench_step" "$BUILD/bench_infinity" "$BUILD/bench_nvme" \
        ${gpu_progs[@]+"${gpu_progs[@]}"} \
        >"$LOGS/gpu_build.log" 2>&1; then
    tail -n 30 "$LOGS/gpu_build.log"
    say "FAIL test_gpu_build: make CUDA=1 failed (see $LOGS/gpu_build.log)"
    fail=1
    finish 1
fi
say "test_gpu: built in $(( $(date +%s) - t0 )) s ($(grep -c -i 'warning' "$LOGS/gpu_build.log") warning lines in $LOGS/gpu_build.log)"

# run NAME LIMIT CMD...: counts its PASS/FAIL lines; a SKIP, a crash, a timeout or no PASS is a failure
run() {
    local name=$1 limit=$2; shift 2
    local log="$LOGS/gpu_$name.log" rc np nf ns
    timeout -k 5 "$limit" "$@" >"$log" 2>&1; rc=$?
    np=$(grep -c '^PASS ' "$log"); nf=$(grep -c '^FAIL ' "$log"); ns=$(grep -c '^SKIP ' "$log")
    grep -E '^(FAIL |SKIP |ratio=|[a-z_]+_GBps=|adamw|copy)' "$log" | sed "s|^|  $name: |" | tee -a "$SUMMARY"
    if [ "$rc" -ne 0 ] && [ "$nf" -eq 0 ]; then
        say "FAIL $name: exit $rc$([ "$rc" -ge 124 ] && echo " (timed out after $limit s?)")"; tail -n 15 "$log"; nf=1
    fi
    if [ "$np" -eq 0 ] && [ "$nf" -eq 0 ]; then say "FAIL $name: no PASS line"; nf=1; fi
    say "$name: $np passed, $nf failed, $ns skipped (a skip is a failure here)"
    pass=$((pass + np)); fail=$((fail + nf + ns))
}
check() {   # check NAME OK MESSAGE
    if [ "$2" -eq 0 ]; then say "PASS $1"; pass=$((pass + 1)); else say "FAIL $1: $3"; fail=$((fail + 1)); fi
}

# ---- 2-3. the programs ---------------------------------------------------------------------
run test_device 240 "$BUILD/cuda/test_device"
grep -q '^PASS cuda_vs_cpu$' "$LOGS/gpu_test_device.log"
check test_device_cuda_ran $? "test_device's CUDA cases did not pass (skipped or failed)"
for p in ${gpu_progs[@]+"${gpu_progs[@]}"}; do run "$(basename "$p")" 180 "$p"; done

# ---- 4. compute-sanitizer, four tools over the kernels and a short training, in parallel ------
TM=(--device cuda --stage 3 --ranks 2 --steps 3 --hidden 64 --layers 2 --batch 16 --quiet)
if [ -z "$SANITIZER" ]; then
    check compute_sanitizer 1 "compute-sanitizer not found (looked in \$CUDA_HOME/bin and on PATH)"
else
    pids=()
    for tool in memcheck racecheck synccheck initcheck; do
        extra=()
        [ "$tool" = memcheck ] && extra=(--leak-check full)
        timeout -k 5 200 "$SANITIZER" --tool "$tool" --error-exitcode 99 ${extra[@]+"${extra[@]}"} \
            "$BUILD/cuda/gpu_kernels" >"$LOGS/gpu_san_${tool}_kernels.log" 2>&1 &
        pids+=("$!:${tool}_kernels")
        timeout -k 5 200 "$SANITIZER" --tool "$tool" --error-exitcode 99 ${extra[@]+"${extra[@]}"} \
            "$BUILD/cuda/train_mlp" "${TM[@]}" >"$LOGS/gpu_san_${tool}_train.log" 2>&1 &
        pids+=("$!:${tool}_train")
    done
    for pn in "${pids[@]}"; do
        wait "${pn%%:*}"; rc=$?
        log="$LOGS/gpu_san_${pn#*:}.log"
        errs=$(grep -E -m1 '(ERROR SUMMARY: [1-9]|RACECHECK SUMMARY: [1-9]|========= (Invalid|Race|Uninitialized|Barrier|Program hit))' "$log")
        check "sanitizer_${pn#*:}" $(( rc != 0 || ${#errs} > 0 )) "exit $rc ${errs:-$(tail -n 3 "$log" | tr '\n' ' ')}"
    done
fi

# ---- 5. train_mlp: reproducible, CUDA_LAUNCH_BLOCKING, a non-blocking stream, vs emu ---------
M=(--hidden 256 --layers 4 --batch 64 --steps 60 --quiet --stage 3 --ranks 2 --dtype bf16)
P="$LOGS/gpu_params"
train() {   # train NAME [ENV=V ...] -- ARGS: build/cuda/train_mlp, params into $P.NAME
    local name=$1; shift
    local envs=()
    while [ "$1" != -- ]; do envs+=("$1"); shift; done; shift
    env ${envs[@]+"${envs[@]}"} timeout -k 5 120 "$BUILD/cuda/train_mlp" "${M[@]}" --device cuda --save-params "$P.$name" \
        "$@" >"$LOGS/gpu_train_$name.log" 2>&1
}
train a -- ; ra=$?
train b -- ; rb=$?
train blocking CUDA_LAUNCH_BLOCKING=1 -- ; rl=$?
train nonblocking -- --nonblocking-stream; rn=$?
check train_mlp_cuda_runs $(( ra || rb || rl || rn )) "exit codes $ra $rb $rl $rn: $(tail -n 2 "$LOGS"/gpu_train_*.log | tr '\n' ' ')"
cmp -s "$P.a" "$P.b"; check train_mlp_cuda_twice_bitwise $? "two runs gave different params"
cmp -s "$P.a" "$P.blocking"; check train_mlp_cuda_vs_launch_blocking $? "CUDA_LAUNCH_BLOCKING=1 gave different params"
cmp -s "$P.a" "$P.nonblocking"; check train_mlp_cuda_nonblocking_stream $? "--nonblocking-stream gave different params"
if timeout -k 5 120 "$BUILD/train_mlp" "${M[@]}" --device emu >"$LOGS/gpu_train_emu.log" 2>&1; then
    lc=$(sed -n 's/^final loss=\([^ ]*\).*/\1/p' "$LOGS/gpu_train_a.log")
    le=$(sed -n 's/^final loss=\([^ ]*\).*/\1/p' "$LOGS/gpu_train_emu.log")
    say "  train_mlp: cuda $(tail -n 1 "$LOGS/gpu_train_a.log")"
    say "  train_mlp: emu  $(tail -n 1 "$LOGS/gpu_train_emu.log")"
    [ -n "$lc" ] && [ -n "$le" ] && awk "BEGIN { d = $lc - $le; exit !(d < 0.02 && d > -0.02 && $lc < 2.5) }"
    check train_mlp_cuda_vs_emu $? "loss cuda '$lc' vs emu '$le'"
else
    check train_mlp_cuda_vs_emu 1 "build/train_mlp --device emu failed: $(tail -n 2 "$LOGS/gpu_train_emu.log")"
fi
# ZeRO++ (qwz + qgz + hpz, 4 ranks on the GPU in nodes of 2): twice bitwise, and the loss of
# the EMU device's run (cuBLAS GEMMs round differently from the CPU's: a tolerance)
Z=(--ranks 4 --qwz --qgz --hpz 2)
train zpp_a -- "${Z[@]}"; za=$?
train zpp_b -- "${Z[@]}"; zb=$?
check train_mlp_cuda_zpp_runs $(( za || zb )) "exit codes $za $zb: $(tail -n 2 "$LOGS"/gpu_train_zpp_*.log | tr '\n' ' ')"
cmp -s "$P.zpp_a" "$P.zpp_b"; check train_mlp_cuda_zpp_twice_bitwise $? "two ZeRO++ runs gave different params"
if timeout -k 5 120 "$BUILD/train_mlp" "${M[@]}" "${Z[@]}" --device emu >"$LOGS/gpu_train_zpp_emu.log" 2>&1; then
    lc=$(sed -n 's/^final loss=\([^ ]*\).*/\1/p' "$LOGS/gpu_train_zpp_a.log")
    le=$(sed -n 's/^final loss=\([^ ]*\).*/\1/p' "$LOGS/gpu_train_zpp_emu.log")
    say "  train_mlp ZeRO++: cuda $(tail -n 1 "$LOGS/gpu_train_zpp_a.log")"
    [ -n "$lc" ] && [ -n "$le" ] && awk "BEGIN { d = $lc - $le; exit !(d < 0.02 && d > -0.02 && $lc < 2.5) }"
    check train_mlp_cuda_zpp_vs_emu $? "loss cuda '$lc' vs emu '$le'"
else
    check train_mlp_cuda_zpp_vs_emu 1 "build/train_mlp --device emu with ZeRO++ failed: $(tail -n 2 "$LOGS/gpu_train_zpp_emu.log")"
fi
rm -f "$P".*

# ---- 6. build/bench_zpp on this machine's cores (a CPU benchmark: 8 local ranks, modelled
# links; on a small CI machine the ranks share two cores, here each can have its own) -------
if timeout -k 5 120 "$BUILD/bench_zpp" >"$LOGS/gpu_bench_zpp.log" 2>&1 && grep -q '^ratio=' "$LOGS/gpu_bench_zpp.log"; then
    grep -E 'ms/step|cross_bytes_ratio=|modelled|ratio_est|^ratio=' "$LOGS/gpu_bench_zpp.log" | sed 's|^|  bench_zpp: |' | tee -a "$SUMMARY"
    check bench_zpp_ran 0 ""
else
    check bench_zpp_ran 1 "build/bench_zpp failed: $(tail -n 2 "$LOGS/gpu_bench_zpp.log")"
fi
# ---- 7. issue #15's CPU and disk benchmarks on this machine's cores and disk (the CI machine
# has 2 cores and a virtio disk): measurements for the summary, each run only while the
# whole stays under 8 minutes (a line says which were left out); one that runs must end
# with its ratio= line ------------------------------------------------------------------------
# (the disk benchmarks' files in $BUILD: /tmp may be a tmpfs, which has no O_DIRECT and no disk)
for spec in "bench_comm|30|" "bench_step|90|" "bench_infinity|90|ZERO_BENCH_DIR=$BUILD" \
            "bench_nvme|150|ZERO_BENCH_DIR=$BUILD ZERO_BENCH_REPS=2"; do
    IFS='|' read -r b lim benv <<<"$spec"
    now=$(( $(date +%s) - t0 ))
    if [ $(( now + lim )) -ge 470 ]; then say "  $b: not run ($now s gone, it may take $lim s)"; continue; fi
    if env $benv timeout -k 5 "$lim" "$BUILD/$b" >"$LOGS/gpu_$b.log" 2>&1 && grep -q '^ratio=' "$LOGS/gpu_$b.log"; then
        grep -E '^(memcpy|reduce_scatter|all_gather|world=|disk|step [0-9]|write|read|ratio=)' "$LOGS/gpu_$b.log" |
            sed "s|^|  $b: |" | tee -a "$SUMMARY"
        check "${b}_ran" 0 ""
    else
        check "${b}_ran" 1 "build/$b failed: $(tail -n 2 "$LOGS/gpu_$b.log")"
    fi
done
elapsed=$(( $(date +%s) - t0 ))
[ "$elapsed" -lt 480 ]; check test_gpu_under_8_minutes $? "took $elapsed s"
[ "$fail" -eq 0 ] && finish 0
finish 1
