#!/usr/bin/env bash
# tests/test_gpu.sh - `make test-gpu`: builds with CUDA=1 and runs the CUDA test binaries
# (build/cuda/test_*, then build/cuda/gpu_* from tests/gpu/*.c) through tests/run_tests.sh, if a GPU is present. Without one it
# says so and exits 0 having run nothing. Not run by `make test`.
set -u
cd "$(dirname "$0")/.." || exit 1
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "test_gpu: no GPU found (nvidia-smi failed or missing); no GPU tests were run"
    exit 0
fi
nvidia-smi -L
make -j"$(nproc)" CUDA=1 all || { echo "test_gpu: make CUDA=1 failed"; echo "0 passed, 1 failed"; exit 1; }
exec bash tests/run_tests.sh cuda gpu
