#!/usr/bin/env bash
# tests/test_cuda_mock.sh - zero.h's CUDA device without a GPU (make test): build/mock/<name>
# is a ZERO_CUDA build linked against tests/cuda_mock/cuda_mock.c, a test double of the CUDA
# runtime, cuBLAS and the zero__k_* kernel launchers that runs on the CPU (its GEMM sums in
# order of k; every other kernel gives the CPU path's bits). So the CUDA device's host code
# (>>device: ops, ZERO_CUDA) runs here, in both of the double's modes: synchronous (every op
# runs at issue; lines "PASS mock_...") and asynchronous, adversarial (ZERO_CUDA_MOCK_ASYNC=1:
# a worker thread per stream, random delays, destinations and unfinished copies read as
# NaN bytes, not-ready queries; lines "PASS mock_async_..."):
#   - build/mock/cuda_mock_selftest: the double's own checks (tests/cuda_mock/selftest.c);
#   - build/mock/test_device: cuda_vs_cpu (the CUDA device against the CPU device, bitwise,
#     every stage at worlds 1-4, ZeRO-Offload), cuda_checkpoint, and cuda_refused (zero_create
#     must succeed); with ZERO_CUDA_MOCK_DEVICES=0 the mock reports no device: NO_DEVICE;
#   - build/mock/cuda_mock_streams: a non-blocking desc.cuda_stream (PyTorch's side
#     streams), bitwise against the CPU device (async: three seeds);
#   - build/mock/train_mlp --device cuda (cuBLAS GEMMs, the GELU / loss kernels) against
#     build/train_mlp --device emu with the same arguments: the final losses must agree
#     within 1e-4 (relative), with and without --offload-optimizer cpu, and with ZeRO++;
#   - train_mlp --device cuda under injected faults (ZERO_CUDA_MOCK_FAIL=NAME:N): a clean error
#     (ZeRO++'s two kernels included);
#   - train_mlp --device cuda --nonblocking-stream against --device emu;
#   - build/mock/cuda_mock_costs (tests/cuda_mock/costs.c, 2 mock devices): zero_stats' host_syncs and
#     device_allocs against the double's own counts of host waits and cudaMalloc calls, and what a
#     steady-state step costs (stage 3, world 2, 8 modules; local comm and NCCL double: "costs" lines);
#   - build/mock/cuda_mock_zpp (tests/cuda_mock/zpp.c, 4 mock devices): ZeRO++'s kernels bitwise
#     the CPU's, qwz/qgz/hpz training on the CUDA device bitwise the CPU device and over the NCCL
#     double bitwise the local comm, the NCCL comm's all_to_all and split, and their mismatches,
#     failures and timeouts (a result code and a message, never a hang).
# Once, in the asynchronous mode with 4 mock devices, over the NCCL test double
# (tests/cuda_mock/nccl_mock.c, linked into every build/mock/ program instead of libnccl):
# build/mock/test_nccl (the TCP rendezvous across forked processes, stages 0-3 at worlds
# 1-4 through zero_run_nccl bitwise the CPU device, ZERO_REDUCE_NCCL to rounding, the
# findings of issue #14, the double's own mismatch/abort checks) and build/mock/gpu_nccl
# (tests/gpu/nccl.c: every collective at worlds 1-4 bitwise the local comm, a mismatch,
# a stalled rank -> ZERO_ERR_TIMEOUT within the timeout). Also once: a driver/runtime
# mismatch (ZERO_CUDA_MOCK_DEVICES=-1) is a FAIL of tests/gpu, not a SKIP, and GPU_ARCH
# embeds PTX. (build/mock-tsan/, the double and the programs under ThreadSanitizer:
# tests/test_cuda_mock_tsan.sh, which make test runs beside this one.)
# ZERO_CUDA_MOCK_LEAKS=1 makes every run fail if device or pinned memory was never freed.
# Where the CUDA or NCCL headers are missing there is nothing to build: one SKIP line says so.
set -u
cd "$(dirname "$0")/.." || exit 1
BUILD=${BUILD:-build}
mkdir -p "$BUILD/logs"
LOG=$BUILD/logs/cuda_mock_build.log

# the Makefile's own detection of the CUDA headers and libnccl (CUDA_HOME, NCCL_LIBDIR)
if [ "$(make --no-print-directory -s BUILD="$BUILD" mock-available 2>/dev/null)" != 1 ]; then
    echo "SKIP cuda_mock: the CUDA or NCCL headers are missing (make mock-available), nothing to build"
    exit 0
fi
# (its makes build as many programs at a time as there are cores: ZERO_JOBS)
JOBS=${ZERO_JOBS:-$(nproc 2>/dev/null || echo 2)}
if ! make --no-print-directory -j"$JOBS" BUILD="$BUILD" "$BUILD/mock/test_device" "$BUILD/mock/train_mlp" "$BUILD/mock/gpu_kernels" \
        "$BUILD/mock/cuda_mock_selftest" "$BUILD/mock/cuda_mock_streams" "$BUILD/mock/test_nccl" "$BUILD/mock/gpu_nccl" \
        "$BUILD/mock/test_stash" "$BUILD/mock/cuda_mock_zpp" "$BUILD/mock/cuda_mock_staging" "$BUILD/mock/gpu_bench_staging" "$BUILD/mock/cuda_mock_costs" \
        "$BUILD/train_mlp" >"$LOG" 2>&1; then
    echo "FAIL cuda_mock_build: make of the build/mock/ programs failed (see $LOG)"
    tail -n 20 "$LOG"
    exit 1
fi
export ZERO_CUDA_MOCK_LEAKS=1
fails=0
fail() { echo "FAIL $1"; fails=$((fails + 1)); }

# every check of one mode of the double; P: the prefix of its lines
mode_checks() {
    local P=$1 seeds=$2
    # 1. test_device with one (mock) device: its CUDA cases' PASS lines and every FAIL line are ours
    #    (its CPU and EMU cases are make test's build/test_device)
    out=$("$BUILD/mock/test_device" 2>&1); rc=$?
    printf '%s\n' "$out" | grep -E '^(PASS cuda_|FAIL )' | sed "s/^\\(PASS\\|FAIL\\) /\\1 ${P}device_/"
    if ! printf '%s\n' "$out" | grep -q '^PASS cuda_vs_cpu$'; then
        fail "${P}device_cuda_vs_cpu_ran: cuda_vs_cpu did not pass with the mock device (exit $rc)"
        printf '%s\n' "$out" | grep -v -E '^(PASS|FAIL) ' | tail -n 20
    elif [ "$rc" -ne 0 ]; then
        fail "${P}device_exit: build/mock/test_device exited $rc"
        printf '%s\n' "$out" | grep -v -E '^(PASS|FAIL) ' | tail -n 20
    fi

    # 2. the activation stash on the CUDA device (its CUDA cases; every line is ours)
    out=$("$BUILD/mock/test_stash" 2>&1); rc=$?
    printf '%s\n' "$out" | grep -E '^(PASS|FAIL|SKIP) ' | sed "s/^\\(PASS\\|FAIL\\|SKIP\\) /\\1 ${P}stash_/"
    [ "$rc" -eq 0 ] || fail "${P}stash: build/mock/test_stash exited $rc"

    # 0. the double's own checks: the misuse it refuses, the semantics zero.h relies on
    out=$("$BUILD/mock/cuda_mock_selftest" 2>/dev/null); rc=$?
    #    (its asynchronous checks: in the async mode; the sync mode's SKIP of them is not shown)
    printf '%s\n' "$out" | grep -E '^(PASS|FAIL|SKIP) ' | grep -v '^SKIP async:' |
        sed "s/^\\(PASS\\|FAIL\\|SKIP\\) /\\1 ${P}selftest_/"
    [ "$rc" -eq 0 ] || fail "${P}selftest: build/mock/cuda_mock_selftest exited $rc"

    # (tests/gpu/kernels.c, the kernels themselves on the emulator behind the double: tests/test_kernels.sh)

    # 3. train_mlp: the CUDA device path against the EMU device path
    final_loss() { sed -n 's/^final loss=\([^ ]*\).*/\1/p' | tail -n 1; }
    train_vs_emu() {
        local name=$1; shift
        local a b
        a=$("$BUILD/mock/train_mlp" --device cuda "$@" --quiet 2>"$BUILD/logs/cuda_mock_$P$name.err")
        local ra=$?
        local e=() x
        for x in "$@"; do [ "$x" = --nonblocking-stream ] || e+=("$x"); done   # CUDA only
        b=$("$BUILD/train_mlp" --device emu "${e[@]}" --quiet 2>/dev/null)
        local rb=$?
        la=$(printf '%s\n' "$a" | final_loss); lb=$(printf '%s\n' "$b" | final_loss)
        if [ "$ra" -ne 0 ] || [ "$rb" -ne 0 ] || [ -z "$la" ] || [ -z "$lb" ]; then
            fail "${P}train_$name: exit cuda $ra emu $rb; $(printf '%s\n' "$a" | tail -n 2) $(tail -n 3 "$BUILD/logs/cuda_mock_$P$name.err")"
        elif awk -v a="$la" -v b="$lb" 'BEGIN { d = a - b; if (d < 0) d = -d; s = b < 0 ? -b : b; exit !(d <= 1e-4 * s + 1e-6) }'; then
            echo "PASS ${P}train_$name"
        else
            fail "${P}train_$name: final loss cuda $la vs emu $lb"
        fi
    }
    ARGS="--stage 3 --ranks 2 --steps 20 --hidden 96 --layers 3 --batch 24 --clip 1.0 --wd 0.01"
    train_vs_emu stage3_ranks2 $ARGS
    train_vs_emu stage3_ranks2_offload $ARGS --offload-optimizer cpu
    train_vs_emu stage0_ranks3_f16_sgd --stage 0 --ranks 3 --steps 10 --hidden 40 --layers 2 --batch 24 --dtype f16 --optim sgd
    train_vs_emu stage2_ranks2_accum2 --stage 2 --ranks 2 --steps 10 --hidden 200 --layers 2 --batch 24 --accum 2 --accum-dtype f32
    train_vs_emu stage3_ranks2_nonblocking_stream $ARGS --nonblocking-stream
    #    ZeRO++ (4 ranks in nodes of 2): int8 params and gradients with hpz, and int4 gradients
    train_vs_emu stage3_ranks4_qwz_qgz_hpz2 --stage 3 --ranks 4 --steps 10 --hidden 96 --layers 3 --batch 24 --clip 1.0 \
        --qwz --qgz --hpz 2
    train_vs_emu stage2_ranks4_qgz_int4 --stage 2 --ranks 4 --ranks-per-node 2 --steps 10 --hidden 96 --layers 3 \
        --batch 24 --qgz --qgz-bits 4

    # 4. faults: ZERO_CUDA_MOCK_FAIL=NAME:N makes the Nth call of NAME fail. Every one must end
    #    train_mlp with an error that names it (exit 1: no crash, no hang, nothing leaked).
    #    cudaEventRecord: zero__cuda_mark cannot return an error; task_begin must report it.
    #    (cudaMemcpy: zero.h no longer calls it; cudaMemcpyAsync:1 is zero_build's first copy)
    FA="--stage 3 --ranks 2 --steps 3 --hidden 40 --layers 2 --batch 8 --quiet --clip 1"
    for f in cudaMalloc:1 cudaMalloc:9 cudaStreamCreateWithFlags:2 cudaEventCreateWithFlags:3 cublasCreate:1 \
             cudaMemcpyAsync:1 cudaMemcpyAsync:5 cudaMemsetAsync:2 cudaStreamSynchronize:17 cudaEventRecord:1 \
             cudaEventRecord:7 cudaEventSynchronize:5 cublasSgemm:5 zero__k_opt:1 zero__k_sumsq:1 \
             zero__k_sum_into:5 zero__k_bias_add:1 zero__k_bias_grad:1 zero__k_gelu_bwd:1 zero__k_xent:5; do
        out=$(ZERO_CUDA_MOCK_FAIL=$f timeout -k 5 60 "$BUILD/mock/train_mlp" --device cuda $FA 2>&1); rc=$?
        if [ "$rc" -eq 1 ] && printf '%s\n' "$out" | grep -q 'MOCK_FAIL' &&
           printf '%s\n' "$out" | grep -q -e 'CUDA: .*failed' -e 'out of memory' -e 'cublas.* failed' &&
           ! printf '%s\n' "$out" | grep -q 'cuda_mock_leaks'; then
            echo "PASS ${P}fault_$f"
        else
            fail "${P}fault_$f: exit $rc; $(printf '%s\n' "$out" | tail -n 3 | tr '\n' ' ')"
        fi
    done

    #    ZeRO++'s kernels failing (its encode, its decode) with --qwz --qgz --hpz 2 on 4 ranks
    for f in zero__k_qp_encode:1 zero__k_qp_sum:3; do
        out=$(ZERO_CUDA_MOCK_FAIL=$f timeout -k 5 60 "$BUILD/mock/train_mlp" --device cuda --stage 3 --ranks 4 --steps 3 \
              --hidden 40 --layers 2 --batch 8 --quiet --clip 1 --qwz --qgz --hpz 2 2>&1); rc=$?
        if [ "$rc" -eq 1 ] && printf '%s\n' "$out" | grep -q 'MOCK_FAIL' &&
           printf '%s\n' "$out" | grep -q 'CUDA: the ZeRO++ .* kernel failed' &&
           ! printf '%s\n' "$out" | grep -q 'cuda_mock_leaks'; then
            echo "PASS ${P}fault_zpp_$f"
        else
            fail "${P}fault_zpp_$f: exit $rc; $(printf '%s\n' "$out" | tail -n 3 | tr '\n' ' ')"
        fi
    done

    # 4b. ZeRO++ on the CUDA device and over NCCL (tests/cuda_mock/zpp.c; every line is ours), in
    #     the asynchronous double only: in the synchronous one (12 s) its cases that need the
    #     asynchronous double say SKIP, and the others run schedules the asynchronous one runs too
    if [ "$P" = mock_async_ ]; then
        out=$(ZERO_CUDA_MOCK_DEVICES=4 timeout -k 5 300 "$BUILD/mock/cuda_mock_zpp" 2>&1); rc=$?
        printf '%s\n' "$out" | grep -E '^(PASS|FAIL|SKIP) ' | sed "s/^\\(PASS\\|FAIL\\|SKIP\\) /\\1 ${P}zpp_/"
        if [ "$rc" -ne 0 ]; then
            fail "${P}zpp: build/mock/cuda_mock_zpp exited $rc"
            printf '%s\n' "$out" | grep -v -E '^(PASS|FAIL|SKIP) ' | tail -n 10
        fi
    fi

    # 5. a non-blocking caller stream (desc.cuda_stream), bitwise against the CPU device
    for seed in $seeds; do
        out=$(ZERO_CUDA_MOCK_SEED=$seed timeout -k 5 300 "$BUILD/mock/cuda_mock_streams" 2>&1); rc=$?
        if [ "$rc" -eq 0 ] && ! printf '%s\n' "$out" | grep -q '^FAIL '; then
            echo "PASS ${P}nonblocking_stream_seed$seed ($(printf '%s\n' "$out" | grep -c '^PASS ') cases)"
        else
            fail "${P}nonblocking_stream_seed$seed: build/mock/cuda_mock_streams (exit $rc)"
            printf '%s\n' "$out" | grep -v '^PASS ' | tail -n 10
        fi
    done
    # 6. what a step costs the host (tests/cuda_mock/costs.c): zero_stats' host_syncs and
    #    device_allocs against the double's own counts, and a steady-state step's figures
    out=$(ZERO_CUDA_MOCK_DEVICES=2 timeout -k 5 120 "$BUILD/mock/cuda_mock_costs" 2>&1); rc=$?
    printf '%s\n' "$out" | grep -E '^(PASS|FAIL|SKIP) ' | sed "s/^\\(PASS\\|FAIL\\|SKIP\\) /\\1 ${P}costs_/"
    printf '%s\n' "$out" | grep '^costs ' | sed "s/^/  ${P}/"
    [ "$rc" -eq 0 ] || fail "${P}costs: build/mock/cuda_mock_costs exited $rc"
}
ZERO_CUDA_MOCK_ASYNC=0 mode_checks mock_ 1
ZERO_CUDA_MOCK_ASYNC=1 mode_checks mock_async_ "1 2 3"

# 2. no device: cuda_refused must see ZERO_ERR_NO_DEVICE, cuda_vs_cpu is skipped
out=$(ZERO_CUDA_MOCK_DEVICES=0 "$BUILD/mock/test_device" 2>&1); rc=$?
if [ "$rc" -eq 0 ] && printf '%s\n' "$out" | grep -q '^PASS cuda_refused$' &&
   printf '%s\n' "$out" | grep -q '^SKIP cuda_vs_cpu'; then
    echo "PASS mock_nodevice_refused"
else
    fail "mock_nodevice_refused: with ZERO_CUDA_MOCK_DEVICES=0 (exit $rc)"
    printf '%s\n' "$out" | grep -v '^PASS ' | tail -n 20
fi

# 2b. a driver/runtime mismatch is not "no GPU": tests/gpu must FAIL, not SKIP and pass
out=$(ZERO_CUDA_MOCK_DEVICES=-1 "$BUILD/mock/gpu_kernels" 2>&1); rc=$?
if [ "$rc" -ne 0 ] && printf '%s\n' "$out" | grep -q '^FAIL gpu_kernels_cuda: .*DriverMismatch' &&
   ! printf '%s\n' "$out" | grep -q '^SKIP '; then
    echo "PASS mock_driver_mismatch_fails"
else
    fail "mock_driver_mismatch_fails: with ZERO_CUDA_MOCK_DEVICES=-1 gpu_kernels exited $rc: $(printf '%s\n' "$out" | head -n 2)"
fi

# 6. the NCCL comm over the NCCL double, on the async double with 4 devices (ranks as threads;
#    the forked-process rendezvous inside test_nccl)
for prog in test_nccl gpu_nccl; do
    out=$(ZERO_CUDA_MOCK_ASYNC=1 ZERO_CUDA_MOCK_DEVICES=4 timeout -k 5 300 "$BUILD/mock/$prog" 2>&1); rc=$?
    printf '%s\n' "$out" | grep -E '^(PASS|FAIL|SKIP) ' | sed "s/^\\(PASS\\|FAIL\\|SKIP\\) /\\1 mock_nccl_${prog}_/"
    if [ "$rc" -ne 0 ]; then
        fail "mock_nccl_$prog: build/mock/$prog exited $rc"
        printf '%s\n' "$out" | grep -v -E '^(PASS|FAIL) ' | tail -n 10
    elif ! printf '%s\n' "$out" | grep -q '^PASS '; then
        fail "mock_nccl_$prog: build/mock/$prog ran nothing"
    fi
done

# 7. GPU_ARCH embeds PTX (code=compute_NN), so a GPU newer than its SASS targets still runs
arch=$(make --no-print-directory -s BUILD="$BUILD" gpu-arch 2>/dev/null)
if printf '%s\n' "$arch" | grep -q 'code=compute_[0-9]'; then
    echo "PASS mock_gpu_arch_ptx"
else
    fail "mock_gpu_arch_ptx: GPU_ARCH embeds no PTX (no code=compute_NN): $arch"
fi

# 9. the CUDA device's pipelined copies (tests/cuda_mock/staging.c, ZERO_STAGING_BYTES 256): the pinned
#    double buffer of set / gather / checkpoints and the ZeRO-Offload step by sub-group, bitwise against
#    the CPU device; synchronous, then asynchronous with three seeds, then with the copies on non-blocking
#    streams held back (ZERO_CUDA_MOCK_ASYNC=2: the offload pipeline's d2h/h2d streams; a compute stream
#    not ordered after the last copy up reads the old params); under TSan: tests/test_cuda_mock_tsan.sh
if ! make --no-print-directory BUILD="$BUILD" "$BUILD/mock/cuda_mock_staging" >>"$LOG" 2>&1; then
    fail "mock_staging_build: see $LOG"
else
    for ms in 0:1 1:1 1:2 1:3 2:1; do
        out=$(ZERO_CUDA_MOCK_ASYNC=${ms%%:*} ZERO_CUDA_MOCK_SEED=${ms##*:} timeout -k 5 300 "$BUILD/mock/cuda_mock_staging" 2>&1); rc=$?
        name=mock_staging; [ "${ms%%:*}" = 1 ] && name=mock_async_staging_seed${ms##*:}
        [ "${ms%%:*}" = 2 ] && name=mock_async_hold_staging   # side streams' copies held back
        if [ "$rc" -eq 0 ] && ! printf '%s\n' "$out" | grep -q '^FAIL '; then
            echo "PASS $name ($(printf '%s\n' "$out" | grep -c '^PASS ') cases)"
        else
            fail "$name: build/mock/cuda_mock_staging (exit $rc)"
            printf '%s\n' "$out" | grep -v '^PASS ' | tail -n 10
        fi
    done
fi
#    their calls under injected faults, as in 4: the staging buffers' cudaHostAlloc, a staged copy and its
#    event; with --offload-optimizer cpu the pipeline's event wait and copy (numbers checked in both modes)
for mf in 0:cudaHostAlloc:1 0:cudaMemcpyAsync:8 0:cudaEventRecord:4 1:cudaEventSynchronize:25 1:cudaMemcpyAsync:51; do
    off=; [ "${mf%%:*}" = 1 ] && off="--offload-optimizer cpu"
    f=${mf#*:}
    for mode in 0 1; do
        out=$(ZERO_CUDA_MOCK_ASYNC=$mode ZERO_CUDA_MOCK_FAIL=$f timeout -k 5 60 "$BUILD/mock/train_mlp" --device cuda \
              --stage 3 --ranks 2 --steps 3 --hidden 40 --layers 2 --batch 8 --quiet --clip 1 $off 2>&1); rc=$?
        P=mock_; [ "$mode" = 1 ] && P=mock_async_
        if [ "$rc" -eq 1 ] && printf '%s\n' "$out" | grep -q 'MOCK_FAIL' && printf '%s\n' "$out" | grep -q 'CUDA: .*failed' &&
           ! printf '%s\n' "$out" | grep -q 'cuda_mock_leaks'; then
            echo "PASS ${P}staging_fault_$f${off:+_offload}"
        else
            fail "${P}staging_fault_$f${off:+_offload}: exit $rc; $(printf '%s\n' "$out" | tail -n 3 | tr '\n' ' ')"
        fi
    done
done
#    tests/gpu/bench_staging.c (make test-gpu's set / gather GB/s) as a smoke check: it runs, its values round-trip
if make --no-print-directory BUILD="$BUILD" "$BUILD/mock/gpu_bench_staging" >>"$LOG" 2>&1 &&
   out=$(ZERO_CUDA_MOCK_ASYNC=1 ZERO_BENCH_N=100000 timeout -k 5 120 "$BUILD/mock/gpu_bench_staging" 2>&1) &&
   ! printf '%s\n' "$out" | grep -q '^FAIL ' && printf '%s\n' "$out" | grep -q '^set_f32_GBps='; then
    echo "PASS mock_async_bench_staging_smoke"
else
    fail "mock_async_bench_staging_smoke: $(printf '%s\n' "${out:-}" | grep -v '^PASS ' | tail -n 3 | tr '\n' ' ')"
fi
[ "$fails" -eq 0 ]
