/* tests/gpu/gpu.h - whether a tests/gpu program has a GPU to test. "No GPU" (a SKIP line,
   exit 0) only when CUDA says so: cudaErrorNoDevice, zero devices, or no NVIDIA driver
   loaded at all (cudaErrorInsufficientDriver without /dev/nvidiactl). Any other error of
   cudaGetDeviceCount (a driver older than the runtime, a driver/runtime mismatch, a
   broken install) is a FAIL line: the GPU is there and these tests must not pass
   without running. */
#ifndef ZERO_TESTS_GPU_H
#define ZERO_TESTS_GPU_H
#include <cuda_runtime.h>
#include <stdio.h>
#include <unistd.h>

/* the number of GPUs (> 0), 0 after a SKIP line, -1 after a FAIL line */
static int gpu_count(const char *prog) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if ((e == cudaSuccess && n <= 0) || e == cudaErrorNoDevice ||
        (e == cudaErrorInsufficientDriver && access("/dev/nvidiactl", F_OK) != 0)) {
        printf("SKIP %s: no GPU (cudaGetDeviceCount: %s)\n", prog, cudaGetErrorString(e));
        return 0;
    }
    if (e != cudaSuccess) {
        printf("FAIL %s_cuda: cudaGetDeviceCount failed: %s (%s); a GPU driver is there but CUDA cannot use it\n", prog,
               cudaGetErrorName(e), cudaGetErrorString(e));
        return -1;
    }
    return n;
}
#endif
