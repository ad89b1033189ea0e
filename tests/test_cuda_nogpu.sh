#!/usr/bin/env bash
# tests/test_cuda_nogpu.sh - the CUDA build on a machine without a GPU (make test):
# build/cuda/test_device (from make CUDA=1, which .ci/run runs first) must run every
# CPU and EMU case and refuse ZERO_DEVICE_CUDA with ZERO_ERR_NO_DEVICE and a sentence,
# never crash. With a GPU present the same binary compares the CUDA device with the CPU.
# Where nvcc is missing there is no CUDA build to check: one SKIP line says so.
set -u
cd "$(dirname "$0")/.." || exit 1
BUILD=${BUILD:-build}
mkdir -p "$BUILD/logs"
if ! command -v nvcc >/dev/null 2>&1 && [ ! -x /usr/local/cuda/bin/nvcc ]; then
    echo "SKIP cuda_build: nvcc not found, no CUDA build to check"
    exit 0
fi
if ! make --no-print-directory CUDA=1 "$BUILD/cuda/test_device" >"$BUILD/logs/cuda_test_device_build.log" 2>&1; then
    echo "FAIL cuda_build: make CUDA=1 $BUILD/cuda/test_device failed"
    tail -n 20 "$BUILD/logs/cuda_test_device_build.log"
    exit 1
fi
exec "$BUILD/cuda/test_device"
