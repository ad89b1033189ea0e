#!/usr/bin/env bash
# tests/test_cuda_mock.sh - zero.h's CUDA device without a GPU (make test): build/mock/<name>
# is a ZERO_CUDA build linked against tests/cuda_mock/cuda_mock.c, a test double of the CUDA
# runtime, cuBLAS and the zero__k_* kernel launchers that runs on the CPU (its GEMM sums in
# order of k; every other kernel gives the CPU path's bits). So the CUDA device's host code
# (>>device: ops, ZERO_CUDA) runs here:
#   - build/mock/cuda_mock_selftest: the double's own checks (tests/cuda_mock/selftest.c);
#   - build/mock/test_device: cuda_vs_cpu (the CUDA device against the CPU device, bitwise,
#     every stage at worlds 1-4, ZeRO-Offload), cuda_checkpoint, and cuda_refused (zero_create
#     must succeed); with ZERO_CUDA_MOCK_DEVICES=0 the mock reports no device: NO_DEVICE;
#   - build/mock/gpu_kernels: tests/gpu/kernels.c, every launcher against its CPU reference;
#   - build/mock/train_mlp --device cuda (cuBLAS GEMMs, the GELU / loss kernels) against
#     build/train_mlp --device emu with the same arguments: the final losses must agree
#     within 1e-4 (relative), with and without --offload-optimizer cpu;
#   - train_mlp --device cuda under injected faults (ZERO_CUDA_MOCK_FAIL=NAME:N): a clean error.
# ZERO_CUDA_MOCK_LEAKS=1 makes every run fail if device or pinned memory was never freed.
# Where the CUDA headers or libnccl are missing there is nothing to build: one SKIP line says so.
set -u
cd "$(dirname "$0")/.." || exit 1
BUILD=${BUILD:-build}
mkdir -p "$BUILD/logs"
LOG=$BUILD/logs/cuda_mock_build.log

# the Makefile's own detection of the CUDA headers and libnccl (CUDA_HOME, NCCL_LIBDIR)
if [ "$(make --no-print-directory -s BUILD="$BUILD" mock-available 2>/dev/null)" != 1 ]; then
    echo "SKIP cuda_mock: the CUDA headers or libnccl are missing (make mock-available), nothing to build"
    exit 0
fi
if ! make --no-print-directory BUILD="$BUILD" "$BUILD/mock/test_device" "$BUILD/mock/train_mlp" "$BUILD/mock/gpu_kernels" \
        "$BUILD/mock/cuda_mock_selftest" "$BUILD/train_mlp" >"$LOG" 2>&1; then
    echo "FAIL cuda_mock_build: make of the build/mock/ programs failed (see $LOG)"
    tail -n 20 "$LOG"
    exit 1
fi
export ZERO_CUDA_MOCK_LEAKS=1
fails=0
fail() { echo "FAIL $1"; fails=$((fails + 1)); }

# 1. test_device with one (mock) device: its CUDA cases' PASS lines and every FAIL line are ours
#    (its CPU and EMU cases are make test's build/test_device)
out=$("$BUILD/mock/test_device" 2>&1); rc=$?
printf '%s\n' "$out" | grep -E '^(PASS cuda_|FAIL )' | sed 's/^\(PASS\|FAIL\) /\1 mock_device_/'
if ! printf '%s\n' "$out" | grep -q '^PASS cuda_vs_cpu$'; then
    fail "mock_device_cuda_vs_cpu_ran: cuda_vs_cpu did not pass with the mock device (exit $rc)"
    printf '%s\n' "$out" | grep -v -E '^(PASS|FAIL) ' | tail -n 20
elif [ "$rc" -ne 0 ]; then
    fail "mock_device_exit: build/mock/test_device exited $rc"
    printf '%s\n' "$out" | grep -v -E '^(PASS|FAIL) ' | tail -n 20
fi

# 0. the double's own checks: the misuse it refuses, the semantics zero.h relies on
out=$("$BUILD/mock/cuda_mock_selftest" 2>/dev/null); rc=$?
printf '%s\n' "$out" | grep -E '^(PASS|FAIL) ' | sed 's/^\(PASS\|FAIL\) /\1 mock_selftest_/'
[ "$rc" -eq 0 ] || fail "mock_selftest: build/mock/cuda_mock_selftest exited $rc"

# 1b. the double itself: tests/gpu/kernels.c (every zero__k_* launcher against its CPU reference,
#     on a GPU) run against the mock's launchers
out=$("$BUILD/mock/gpu_kernels" 2>&1); rc=$?
if [ "$rc" -eq 0 ] && ! printf '%s\n' "$out" | grep -q '^FAIL '; then
    echo "PASS mock_kernels_vs_cpu_reference ($(printf '%s\n' "$out" | grep -c '^PASS ') cases)"
else
    fail "mock_kernels_vs_cpu_reference: build/mock/gpu_kernels (exit $rc)"
    printf '%s\n' "$out" | grep -v '^PASS ' | tail -n 20
fi

# 2. no device: cuda_refused must see ZERO_ERR_NO_DEVICE, cuda_vs_cpu is skipped
out=$(ZERO_CUDA_MOCK_DEVICES=0 "$BUILD/mock/test_device" 2>&1); rc=$?
if [ "$rc" -eq 0 ] && printf '%s\n' "$out" | grep -q '^PASS cuda_refused$' &&
   printf '%s\n' "$out" | grep -q '^SKIP cuda_vs_cpu'; then
    echo "PASS mock_nodevice_refused"
else
    fail "mock_nodevice_refused: with ZERO_CUDA_MOCK_DEVICES=0 (exit $rc)"
    printf '%s\n' "$out" | grep -v '^PASS ' | tail -n 20
fi

# 3. train_mlp: the CUDA device path against the EMU device path
final_loss() { sed -n 's/^final loss=\([^ ]*\).*/\1/p' | tail -n 1; }
train_vs_emu() {
    local name=$1; shift
    local a b
    a=$("$BUILD/mock/train_mlp" --device cuda "$@" --quiet 2>"$BUILD/logs/cuda_mock_$name.err")
    local ra=$?
    b=$("$BUILD/train_mlp" --device emu "$@" --quiet 2>/dev/null)
    local rb=$?
    la=$(printf '%s\n' "$a" | final_loss); lb=$(printf '%s\n' "$b" | final_loss)
    if [ "$ra" -ne 0 ] || [ "$rb" -ne 0 ] || [ -z "$la" ] || [ -z "$lb" ]; then
        fail "mock_train_$name: exit cuda $ra emu $rb; $(printf '%s\n' "$a" | tail -n 2) $(tail -n 3 "$BUILD/logs/cuda_mock_$name.err")"
    elif awk -v a="$la" -v b="$lb" 'BEGIN { d = a - b; if (d < 0) d = -d; s = b < 0 ? -b : b; exit !(d <= 1e-4 * s + 1e-6) }'; then
        echo "PASS mock_train_$name"
    else
        fail "mock_train_$name: final loss cuda $la vs emu $lb"
    fi
}
ARGS="--stage 3 --ranks 2 --steps 20 --hidden 96 --layers 3 --batch 24 --clip 1.0 --wd 0.01"
train_vs_emu stage3_ranks2 $ARGS
train_vs_emu stage3_ranks2_offload $ARGS --offload-optimizer cpu
train_vs_emu stage0_ranks3_f16_sgd --stage 0 --ranks 3 --steps 10 --hidden 40 --layers 2 --batch 24 --dtype f16 --optim sgd
train_vs_emu stage2_ranks2_accum2 --stage 2 --ranks 2 --steps 10 --hidden 200 --layers 2 --batch 24 --accum 2 --accum-dtype f32

# 4. faults: ZERO_CUDA_MOCK_FAIL=NAME:N makes the Nth call of NAME fail. Every one must end
#    train_mlp with an error that names it (exit 1: no crash, no hang, nothing leaked).
#    cudaEventRecord: zero__cuda_mark cannot return an error; task_begin must report it.
FA="--stage 3 --ranks 2 --steps 3 --hidden 40 --layers 2 --batch 8 --quiet --clip 1"
for f in cudaMalloc:1 cudaMalloc:9 cudaStreamCreateWithFlags:2 cudaEventCreateWithFlags:3 cublasCreate:1 \
         cudaMemcpy:2 cudaMemcpyAsync:5 cudaMemsetAsync:2 cudaStreamSynchronize:17 cudaEventRecord:1 \
         cudaEventRecord:7 cudaEventSynchronize:5 cublasSgemm:5 zero__k_opt:1 zero__k_sumsq:1 \
         zero__k_sum_into:5 zero__k_bias_add:1 zero__k_bias_grad:1 zero__k_gelu_bwd:1 zero__k_xent:5; do
    out=$(ZERO_CUDA_MOCK_FAIL=$f timeout -k 5 60 "$BUILD/mock/train_mlp" --device cuda $FA 2>&1); rc=$?
    if [ "$rc" -eq 1 ] && printf '%s\n' "$out" | grep -q 'MOCK_FAIL' &&
       printf '%s\n' "$out" | grep -q -e 'CUDA: .*failed' -e 'out of memory' -e 'cublas.* failed' &&
       ! printf '%s\n' "$out" | grep -q 'cuda_mock_leaks'; then
        echo "PASS mock_fault_$f"
    else
        fail "mock_fault_$f: exit $rc; $(printf '%s\n' "$out" | tail -n 3 | tr '\n' ' ')"
    fi
done
[ "$fails" -eq 0 ]
