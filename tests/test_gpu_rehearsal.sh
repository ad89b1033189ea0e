#!/usr/bin/env bash
# tests/test_gpu_rehearsal.sh - `make test-gpu` rehearsed without a GPU (make test): the whole of
# tests/test_gpu.sh through `make test-gpu-rehearsal` (ZERO_GPU_REHEARSAL=1: the build/mock/
# programs on the CUDA and NCCL test doubles and the kernel emulator, the stand-ins of
# tests/standin for nvidia-smi and compute-sanitizer, small sizes), twice:
#   1. whole, with two sanitizer errors planted (an invalid read in a kernel, an API error
#      of the program's own call) beside the default plants that must stay information (an
#      API error inside cuBLAS, an allocation NCCL never freed, a racecheck warning):
#      ZERO_GPU_OUT holds summary.txt and logs.tgz only (at most 8 files, the GPU machine's
#      limit); the summary has one line per step, in order (the GPU steps before the
#      benchmarks); logs.tgz is a valid tarball of every log; every figure (name=value) a
#      program printed is in the summary, set_f32_GBps, pinned_h2d_GBps, offload_step_bf16_ms
#      and ratio= among them; the two planted errors are the run's only FAILs, the other
#      plants are info lines beside PASSes; the exit status is non-zero; the last line is
#      the counts;
#   2. cut by ZERO_GPU_DEADLINE=30: at most 8 files, still every step's line (ran, or "not
#      run: deadline"), at least one step not run and counted as skipped, a valid tarball,
#      within the deadline, exit non-zero.
# Needs the build/mock/ programs (tests/test_cuda_mock.sh, earlier in make test, builds most;
# this builds what is missing); where the CUDA or NCCL headers are missing, one SKIP line.
set -u
cd "$(dirname "$0")/.." || exit 1
BUILD=${BUILD:-build}
mkdir -p "$BUILD/logs"
if [ "$(make --no-print-directory -s BUILD="$BUILD" mock-available 2>/dev/null)" != 1 ]; then
    echo "SKIP gpu_rehearsal: the CUDA or NCCL headers or a C++ compiler are missing (make mock-available), nothing to build"
    exit 0
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/zero_gpu_rehearsal.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL $1"; fails=$((fails + 1)); }
ok() { if [ "$1" -eq 0 ]; then echo "PASS $2"; else fail "$2: ${*:3}"; fi; }   # ok STATUS NAME MESSAGE...

# the steps, in order (tests/gpu/*.c: gpu_kernels and gpu_nccl first, the rest after the sanitizers)
gpu_rest=()
for src in tests/gpu/*.c; do
    p=$(basename "$src" .c)
    [ "$p" = kernels ] || [ "$p" = nccl ] || gpu_rest+=("gpu_$p")
done
STEPS=(probe build test_device gpu_kernels gpu_nccl sanitizers ${gpu_rest[@]+"${gpu_rest[@]}"} train_mlp train_mlp_zpp
       bench_zpp bench_comm bench_step bench_infinity bench_nvme bench_overlap)

# rehearse NAME [ENV=V ...]: make test-gpu-rehearsal into $tmp/NAME; sets RC, SECS, SUM (its summary)
rehearse() {
    local name=$1 t; shift
    mkdir -p "$tmp/$name"
    t=$(date +%s)
    env "$@" ZERO_GPU_OUT="$tmp/$name" timeout -k 5 400 make --no-print-directory BUILD="$BUILD" test-gpu-rehearsal \
        >"$BUILD/logs/gpu_rehearsal_$name.log" 2>&1
    RC=$? SECS=$(( $(date +%s) - t )) SUM="$tmp/$name/summary.txt"
    echo "(rehearsal $name: exit $RC in $SECS s; its output: $BUILD/logs/gpu_rehearsal_$name.log)"
}
# common NAME: the checks both runs must pass
common() {
    local name=$1 out="$tmp/$1" n files want got s
    files=$(find "$out" -mindepth 1 | sed "s|^$out/||" | sort | tr '\n' ' ')
    n=$(find "$out" -mindepth 1 | wc -l)
    [ "$n" -le 8 ] && [ "$files" = "logs.tgz summary.txt " ]
    ok $? "gpu_rehearsal_${name}_out_files" "want summary.txt and logs.tgz alone in ZERO_GPU_OUT, at most 8 files; got $n: $files"
    if [ ! -f "$SUM" ]; then fail "gpu_rehearsal_${name}_summary: no summary.txt"; return; fi
    want=$(printf '%s\n' "${STEPS[@]}" | tr '\n' ' ')
    got=$(sed -n 's/^step \([a-z0-9_]*\): .*/\1/p' "$SUM" | tr '\n' ' ')
    [ "$got" = "$want" ]
    ok $? "gpu_rehearsal_${name}_every_step_in_order" "want the step lines of: $want; got: $got"
    s=$(tail -n 1 "$SUM")
    [[ "$s" =~ ^[0-9]+\ passed,\ [0-9]+\ failed,\ [0-9]+\ skipped$ ]] &&
        [ "$(grep -v -E '^make(\[[0-9]+\])?: \*\*\* ' "$BUILD/logs/gpu_rehearsal_$name.log" | tail -n 1)" = "$s" ]
    ok $? "gpu_rehearsal_${name}_last_line" "the summary's and the output's last line (make's own aside) must be the counts: '$s'"
    [ "${s##*failed, }" = "$(grep -c '^step [a-z0-9_]*: not run: ' "$SUM") skipped" ]
    ok $? "gpu_rehearsal_${name}_skips_counted" "'$s' vs $(grep -c '^step [a-z0-9_]*: not run: ' "$SUM") steps not run"
    mkdir -p "$tmp/$name.logs"
    if tar -xzf "$out/logs.tgz" -C "$tmp/$name.logs" 2>"$tmp/$name.tar.err"; then
        got=$(cd "$tmp/$name.logs" && find . -type f | sort | tr '\n' ' ')
        want=$(cd "$BUILD/logs/gpu_rehearsal" && find . -type f | sort | tr '\n' ' ')
        [ "$got" = "$want" ] && [ -s "$tmp/$name.logs/gpu_build.log" ]
        ok $? "gpu_rehearsal_${name}_logs_tgz" "logs.tgz holds '$got', the logs are '$want'"
    else
        fail "gpu_rehearsal_${name}_logs_tgz: not a tarball: $(head -n 2 "$tmp/$name.tar.err")"
    fi
    [ "$RC" -ne 0 ]
    ok $? "gpu_rehearsal_${name}_exit_nonzero" "exit $RC"
}

# ---- 1. whole, with two errors planted ---------------------------------------------------------
rehearse whole ZERO_STANDIN_SANITIZER="synccheck:train_mlp:libapi memcheck:train_mlp:libleak racecheck:gpu_bench_adamw:warning \
initcheck:gpu_bench_adamw:error synccheck:gpu_bench_adamw:apihit racecheck:train_mlp:slow"
common whole
if [ -f "$SUM" ]; then
    #    every figure of the programs' logs (the sanitizers' runs aside: their program ran above)
    missing=
    while IFS= read -r f; do
        grep -qF -- "$f" "$SUM" || missing="$missing [$f]"
    done < <(find "$tmp/whole.logs" -name 'gpu_*.log' ! -name 'gpu_san_*' -exec grep -h -E '^[a-z][A-Za-z0-9_]*=' {} + 2>/dev/null)
    for f in set_f32_GBps= pinned_h2d_GBps= offload_step_bf16_ms= all_reduce_exact_GBps= 'gpu_bench_adamw: ratio=' 'bench_zpp: ratio='; do
        grep -q -- "$f" "$SUM" || missing="$missing [$f]"
    done
    [ -z "$missing" ]
    ok $? gpu_rehearsal_whole_every_figure "not in the summary:$missing"
    #    the verdict: the planted errors fail, CUDA's libraries' own errors and warnings are information
    fl=$(grep '^FAIL ' "$SUM")
    [ "$(printf '%s\n' "$fl" | grep -c .)" -eq 2 ] &&
        printf '%s\n' "$fl" | grep -q '^FAIL sanitizer_initcheck_kernels: ERROR SUMMARY: 1 error(s), 1 of them the program.s: Invalid __global__ read' &&
        printf '%s\n' "$fl" | grep -q '^FAIL sanitizer_synccheck_kernels: ERROR SUMMARY: 1 error(s), 1 of them the program.s: Program hit .*cudaMemcpyAsync'
    ok $? gpu_rehearsal_whole_sanitizer_errors_fail "want exactly the two planted errors as FAILs; got: $(printf '%s\n' "$fl" | head -n 5 | tr '\n' '|')"
    grep -q '^PASS sanitizer_synccheck_train$' "$SUM" &&
        grep -q '^  sanitizer_synccheck_train: info: Program hit .*(inside libcublasLt.so.13: CUDA.s own' "$SUM" &&
        grep -q '^PASS sanitizer_memcheck_train$' "$SUM" &&
        grep -q '^  sanitizer_memcheck_train: info: Leaked 2097152 bytes .*(inside libnccl.so.2: CUDA.s own' "$SUM" &&
        grep -q '^PASS sanitizer_racecheck_kernels$' "$SUM" &&
        grep -q '^  sanitizer_racecheck_kernels: info: Warning: (Warp Level Programming) Potential RAW hazard' "$SUM" &&
        grep -q '^  sanitizer_racecheck_kernels: info: RACECHECK SUMMARY: 1 hazard displayed (0 errors, 1 warning)' "$SUM" &&
        grep -q '^PASS sanitizer_racecheck_train2$' "$SUM" &&
        [ "$(grep -c '^PASS sanitizer_' "$SUM")" -eq 7 ]
    ok $? gpu_rehearsal_whole_sanitizer_info "CUDA's libraries' errors and racecheck's warnings must be info lines" \
        "beside 7 PASSes: $(grep 'sanitizer_' "$SUM" | head -n 12 | tr '\n' '|')"
    #    racecheck's two-rank run, started late (the 'slow' plant), had its threads looked at after 3 s
    st="$tmp/whole.logs/gpu_san_racecheck_train2_stacks.log"
    grep -q '^== pid [0-9]*: .*compute-sanitizer --tool racecheck' "$st" 2>/dev/null &&
        [ "$(grep -c '^== pid ' "$st")" -ge 2 ] && grep -q -E '(^Thread |^#0 |wchan=)' "$st"
    ok $? gpu_rehearsal_whole_hung_threads "want the sanitizer's and its children's threads in $(basename "$st"): \
$(head -n 4 "$st" 2>/dev/null | tr '\n' '|')"
    #    everything else ran and passed
    [ "$(grep -c '^step [a-z0-9_]*: not run: ' "$SUM")" -eq 1 ] && grep -q '^step bench_infinity: not run: rehearsal' "$SUM" &&
        grep -q '^PASS test_device_cuda_ran$' "$SUM" && grep -q '^PASS train_mlp_cuda_twice_bitwise$' "$SUM" &&
        grep -q '^PASS train_mlp_cuda_zpp_vs_emu$' "$SUM" && grep -q '^PASS bench_nvme_ran$' "$SUM" &&
        grep -q '^PASS test_gpu_within_deadline$' "$SUM"
    ok $? gpu_rehearsal_whole_ran_all \
        "every step but bench_infinity must run and pass: $(grep -E '^(step .*not run|FAIL )' "$SUM" | head -n 5 | tr '\n' '|')"
fi

# ---- make gpu-sanitizer names one program, the first found (the CUDA 13.0 toolkit has both
#      bin/compute-sanitizer and compute-sanitizer/compute-sanitizer: the first GPU run got the two
#      paths as one command, and every sanitizer run failed with exit 127)
mkdir -p "$tmp/cuda/bin" "$tmp/cuda/compute-sanitizer"
touch "$tmp/cuda/bin/compute-sanitizer" "$tmp/cuda/compute-sanitizer/compute-sanitizer"
got=$(MAKEFLAGS= MAKELEVEL= make --no-print-directory -s BUILD="$BUILD" CUDA_HOME="$tmp/cuda" gpu-sanitizer 2>/dev/null)
[ "$got" = "$tmp/cuda/bin/compute-sanitizer" ]
ok $? gpu_rehearsal_sanitizer_one_path "make gpu-sanitizer with both of the toolkit's paths printed '$got'"

# ---- 2. cut by a 30 s deadline --------------------------------------------------------------------
rehearse deadline ZERO_GPU_DEADLINE=30
common deadline
if [ -f "$SUM" ]; then
    grep -q '^step [a-z0-9_]*: not run: deadline (' "$SUM" &&
        grep -q '^test_gpu: [0-9]* GPU step(s) did not run (the deadline, or no build): not a pass' "$SUM"
    ok $? gpu_rehearsal_deadline_cut "want steps not run for the deadline, and the line saying the run is not a pass"
    [ "$SECS" -le 35 ]
    ok $? gpu_rehearsal_deadline_kept "ZERO_GPU_DEADLINE=30 took $SECS s"
fi
[ "$fails" -eq 0 ]
