/* tests/kemu/checks.cu - the CPU grid emulator's own checks (build/mock/kemu_checks, and under
   ASan build/kemu-asan/kemu_checks; tests/test_kernels.sh runs both).

   CUDA C++ that tests/kemu/rewrite.sh turns into C++ for the emulator, as it does
   zero_kernels.cu. Small kernels with one deliberate fault each, every one a mistake a first
   GPU run would show: each must be reported (a "kemu:" line naming the fault) and fail its
   launch with the error a GPU gives; and correct kernels using the same features (block
   reductions, every shuffle, votes, __syncwarp, dynamic shared memory, 3-D grids) must give
   the results the CUDA programming guide defines, without a report. `kemu_checks oob` writes
   one element past a device allocation and returns: under ASan that is a heap-buffer-overflow
   report and a non-zero exit (tests/test_kernels.sh checks it). */
#include "zero.h"             /* -I. (the build compiles a rewritten copy elsewhere) */
#include "tests/test.h"

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the faults ---- */
__global__ void k_misaligned(float *out, const float *in) {       /* in + 1 is not 16-byte aligned */
    float4 v = __ldcs((const float4 *)(in + 1));
    out[threadIdx.x] = v.x;
}
__global__ void k_bar_divergent(float *out) {                      /* half the block at the barrier */
    if (threadIdx.x < 128) __syncthreads();
    out[threadIdx.x] = 1.0f;
}
__global__ void k_bar_after_exit(float *out) {                     /* a thread returns, the rest wait */
    if (threadIdx.x == 5) return;
    __syncthreads();
    out[threadIdx.x] = 1.0f;
}
__global__ void k_bar_two_sites(float *out) {                      /* two different __syncthreads */
    if (threadIdx.x & 1) __syncthreads();
    else __syncthreads();
    out[threadIdx.x] = 1.0f;
}
__global__ void k_shfl_leaves_out(float *out) {                    /* every lane names only lanes 0-15 */
    out[threadIdx.x] = __shfl_sync(0x0000ffffu, (float)threadIdx.x, 0);
}
__global__ void k_shfl_exited(float *out) {                        /* lanes 16-31 are gone */
    if ((threadIdx.x & 31) >= 16) return;
    out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, (float)threadIdx.x, 1);
}
__global__ void k_shfl_reads_outside(float *out) {                 /* lanes 0-15 read lane 20 */
    if ((threadIdx.x & 31) < 16) out[threadIdx.x] = __shfl_sync(0x0000ffffu, (float)threadIdx.x, 20, 32);
}
__global__ void k_shfl_width(float *out) {                         /* width 3 */
    out[threadIdx.x] = __shfl_down_sync(0xffffffffu, (float)threadIdx.x, 1, 3);
}
__global__ void k_shfl_two_sites(float *out) {                     /* one mask, two shuffles */
    float v = (float)threadIdx.x;
    if (threadIdx.x & 1) v = __shfl_xor_sync(0xffffffffu, v, 2);
    else v = __shfl_xor_sync(0xffffffffu, v, 4);
    out[threadIdx.x] = v;
}
__global__ void k_shfl_vs_barrier(float *out) {                    /* warp 0 shuffles, lane 3 waits at a barrier */
    float v = (float)threadIdx.x;
    if (threadIdx.x == 3) __syncthreads();
    else if (threadIdx.x < 32) v = __shfl_xor_sync(0xffffffffu, v, 1);
    out[threadIdx.x] = v;
}
__global__ void k_shared_ww(float *out) {                          /* everyone writes s[0] */
    __shared__ float s[4];
    s[0] = (float)threadIdx.x;
    __syncthreads();
    out[threadIdx.x] = s[0];
}
__global__ void k_shared_rw(float *out) {                          /* thread 0 reads what warp 1 writes, no barrier */
    __shared__ float s[8];
    if ((threadIdx.x & 31) == 0) s[threadIdx.x / 32] = 1.0f;
    __syncthreads();
    if (threadIdx.x == 0) out[0] = s[1];
    if (threadIdx.x == 32) s[1] = 2.0f;
}
__global__ void k_shared_missing_barrier(float *out) {             /* a reduction without its barrier */
    __shared__ float s[8];
    if ((threadIdx.x & 31) == 0) s[threadIdx.x / 32] = (float)threadIdx.x;
    if (threadIdx.x == 0) {
        float t = 0.0f;
        for (int w = 0; w < 8; w++) t += s[w];
        out[0] = t;
    }
}
__global__ void k_shared_uninit(float *out) {                      /* s[3] is never written */
    __shared__ float s[4];
    if (threadIdx.x < 3) s[threadIdx.x] = 1.0f;
    __syncthreads();
    out[threadIdx.x] = s[threadIdx.x & 3];
}
__global__ void k_shared_oob(float *out) {                         /* s[8] of s[8] */
    __shared__ float s[8];
    if (threadIdx.x < 8) s[threadIdx.x] = 1.0f;
    __syncthreads();
    if (threadIdx.x == 0) out[0] = s[8];
}
__global__ void k_dyn_oob(float *out) {                            /* 64 bytes of dynamic shared memory */
    extern __shared__ float d[];
    d[threadIdx.x] = 1.0f;
    __syncthreads();
    out[threadIdx.x] = d[threadIdx.x];
}
__global__ void k_host_ptr(float *out) { out[threadIdx.x] = 1.0f; }

/* ---- correct kernels ---- */
/* one sum per block: the shuffles, then the warps' partial sums through shared memory */
template <class SH> __device__ float block_sum(float v, SH &sh) {
    for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
    if ((threadIdx.x & 31) == 0) sh[threadIdx.x / 32] = v;
    __syncthreads();
    v = 0.0f;
    for (unsigned w = 0; w < blockDim.x / 32; w++) v += sh[w];
    __syncthreads();                                               /* sh is written again next time */
    return v;
}
__global__ void k_sums(float *out, const float *in, int n) {       /* grid-stride over rows of 256 */
    __shared__ float sh[8];
    for (int r = blockIdx.x; r < n; r += gridDim.x) {
        float s = block_sum(in[r * 256 + threadIdx.x], sh);
        s = block_sum(s, sh);                                      /* twice: the trailing barrier matters */
        if (threadIdx.x == 0) out[r] = s;
    }
}
/* every shuffle and vote, per lane: idx, up, down, xor (width 8), ballot, any, all */
__global__ void k_lanes(int *out) {
    const int l = threadIdx.x & 31;
    int *o = out + 8 * threadIdx.x;
    o[0] = __shfl_sync(0xffffffffu, l * 10, (l + 5) & 31);
    o[1] = __shfl_up_sync(0xffffffffu, l * 10, 3);
    o[2] = __shfl_down_sync(0xffffffffu, l * 10, 3);
    o[3] = __shfl_xor_sync(0xffffffffu, l * 10, 9, 8);
    o[4] = (int)__ballot_sync(0xffffffffu, l % 3 == 0);
    o[5] = __any_sync(0xffffffffu, l == 31);
    o[6] = __all_sync(0xffffffffu, l < 31);
    o[7] = l < 16 ? __shfl_sync(0x0000ffffu, l, 15 - l, 16) : -1;  /* a sub-mask */
}
/* lanes of one warp hand a value on through shared memory, __syncwarp between */
__global__ void k_syncwarp(int *out) {
    __shared__ int s[32];
    s[threadIdx.x] = (int)threadIdx.x;
    __syncwarp();
    out[threadIdx.x] = s[(threadIdx.x + 1) & 31];
}
/* each block of a 3-D grid of 3-D blocks counts itself once */
__global__ void k_grid3(int *count, int *tid_sum) {
    const int b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    const int t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    extern __shared__ int d[];
    d[t] = t;
    __syncthreads();
    if (t == 0) {
        int s = 0;
        for (unsigned i = 0; i < blockDim.x * blockDim.y * blockDim.z; i++) s += d[i];
        count[b] += 1;
        tid_sum[b] = s;
    }
}

/* ---- the driver ---- */
static float *dev_f(size_t n) {
    void *p = NULL;
    if (cudaMalloc(&p, n * sizeof(float)) != cudaSuccess) { fprintf(stderr, "cudaMalloc failed\n"); exit(1); }
    cudaMemset(p, 0, n * sizeof(float));
    return (float *)p;
}
/* a faulty launch: a report naming `want`, and an error from the launch or the sync */
static void expect_fault(const char *name, const char *want, cudaError_t code, void (*launch)(float *), float *buf) {
    long before = kemu_reports();
    cudaError_t le, se;
    test_begin("%s", name);
    launch(buf);
    le = cudaGetLastError();
    se = cudaDeviceSynchronize();
    CHECK(kemu_reports() > before, "no report");
    CHECK(strstr(kemu_last_report(), want) != NULL, "the report does not say \"%s\": %s", want, kemu_last_report());
    CHECK(le == code || se == code, "launch %s, sync %s: want %s", cudaGetErrorName(le), cudaGetErrorName(se),
          cudaGetErrorName(code));
    test_end();
}
#define FAULT(K, WANT, CODE, ...)                                               \
    do {                                                                        \
        struct L { static void go(float *b) { K<<<__VA_ARGS__>>>(b); } };       \
        expect_fault(#K, WANT, CODE, L::go, buf);                               \
    } while (0)

static void misaligned_go(float *b) { k_misaligned<<<1, 32>>>(b, b + 64); }

int main(int argc, char **argv) {
    float *buf, *in, *sums, h[64 * 256], got[64];
    int *ibuf, lanes[256], i, r, bad;
    test_init();
    if (argc > 1 && strcmp(argv[1], "oob") == 0) {      /* one float past a 64-float allocation */
        float *d = dev_f(64);
        k_host_ptr<<<1, 65>>>(d);
        cudaDeviceSynchronize();
        printf("FAIL kemu_oob: the write past the allocation went unnoticed (run this under ASan)\n");
        return 1;
    }
    buf = dev_f(1024);

    test_begin("misaligned_ldcs");
    {
        long before = kemu_reports();
        misaligned_go(buf);
        cudaError_t le = cudaGetLastError(), se = cudaDeviceSynchronize();
        CHECK(kemu_reports() > before && strstr(kemu_last_report(), "misaligned address"), "no report: %s",
              kemu_last_report());
        CHECK(le == cudaErrorMisalignedAddress || se == cudaErrorMisalignedAddress, "launch %s, sync %s",
              cudaGetErrorName(le), cudaGetErrorName(se));
    }
    test_end();
    FAULT(k_bar_divergent, "__syncthreads reached by part of the block", cudaErrorLaunchFailure, 1, 256);
    FAULT(k_bar_after_exit, "__syncthreads reached by part of the block", cudaErrorLaunchFailure, 1, 256);
    FAULT(k_bar_two_sites, "different __syncthreads", cudaErrorLaunchFailure, 1, 64);
    FAULT(k_shfl_leaves_out, "which leaves it out", cudaErrorLaunchFailure, 1, 32);
    FAULT(k_shfl_exited, "exited", cudaErrorLaunchFailure, 1, 32);
    FAULT(k_shfl_reads_outside, "which is not in the mask", cudaErrorLaunchFailure, 1, 32);
    FAULT(k_shfl_width, "power of two", cudaErrorLaunchFailure, 1, 32);
    FAULT(k_shfl_two_sites, "different warp operations", cudaErrorLaunchFailure, 1, 32);
    FAULT(k_shfl_vs_barrier, "__syncthreads", cudaErrorLaunchFailure, 1, 64);
    FAULT(k_shared_ww, "both write", cudaErrorLaunchFailure, 1, 64);
    FAULT(k_shared_rw, "no barrier between", cudaErrorLaunchFailure, 1, 256);
    FAULT(k_shared_missing_barrier, "__shared__ s[", cudaErrorLaunchFailure, 1, 256);
    FAULT(k_shared_uninit, "no thread of this block has written", cudaErrorLaunchFailure, 1, 64);
    FAULT(k_shared_oob, "out of bounds", cudaErrorIllegalAddress, 1, 64);
    FAULT(k_dyn_oob, "out of bounds", cudaErrorIllegalAddress, 1, 32, 64);
    FAULT(k_host_ptr, "", cudaErrorInvalidConfiguration, 1, 2048);
    test_begin("host_pointer");
    {
        static float host[32];
        k_host_ptr<<<1, 32>>>(host);
        cudaError_t le = cudaGetLastError(), se = cudaDeviceSynchronize();
        CHECK(le == cudaErrorIllegalAddress || se == cudaErrorIllegalAddress, "a host pointer: launch %s, sync %s",
              cudaGetErrorName(le), cudaGetErrorName(se));
    }
    test_end();

    /* the correct kernels: no report, the defined results */
    long before = kemu_reports();
    test_begin("block_sums");
    in = dev_f(64 * 256);
    sums = dev_f(64);
    for (i = 0; i < 64 * 256; i++) h[i] = (float)(i % 7) - 3.0f + (float)(i / 256);
    cudaMemcpy(in, h, sizeof h, cudaMemcpyHostToDevice);
    k_sums<<<5, 256>>>(sums, in, 64);                               /* 5 blocks: the grid-stride loop wraps */
    CHECK(cudaDeviceSynchronize() == cudaSuccess, "k_sums failed: %s", kemu_last_report());
    cudaMemcpy(got, sums, sizeof got, cudaMemcpyDeviceToHost);
    for (r = 0, bad = 0; r < 64; r++) {
        float want = 0.0f;
        for (i = 0; i < 256; i++) want += h[r * 256 + i];
        bad += !CHECK(got[r] == 256.0f * want, "row %d: %g, want %g", r, (double)got[r], (double)(256.0f * want));
        if (bad > 3) break;
    }
    test_end();

    test_begin("shuffles_and_votes");
    cudaMalloc((void **)&ibuf, 8 * 32 * sizeof(int));
    k_lanes<<<1, 32>>>(ibuf);
    CHECK(cudaDeviceSynchronize() == cudaSuccess, "k_lanes failed: %s", kemu_last_report());
    cudaMemcpy(lanes, ibuf, sizeof lanes, cudaMemcpyDeviceToHost);
    for (i = 0, bad = 0; i < 32 && bad < 4; i++) {
        unsigned ballot = 0;
        int j, want[8];
        for (j = 0; j < 32; j++) ballot |= (unsigned)(j % 3 == 0) << j;
        want[0] = ((i + 5) & 31) * 10;
        want[1] = i >= 3 ? (i - 3) * 10 : i * 10;            /* lanes below delta keep their own */
        want[2] = i + 3 <= 31 ? (i + 3) * 10 : i * 10;
        want[3] = (i ^ 9) < (i & ~7) + 8 ? (i ^ 9) * 10 : i * 10;   /* xor 9 leaves the 8-lane segment: own value */
        want[4] = (int)ballot;
        want[5] = 1;
        want[6] = 0;
        want[7] = i < 16 ? 15 - i : -1;
        for (j = 0; j < 8; j++)
            bad += !CHECK(lanes[8 * i + j] == want[j], "lane %d, op %d: %d, want %d", i, j, lanes[8 * i + j], want[j]);
    }
    test_end();

    test_begin("syncwarp");
    k_syncwarp<<<1, 32>>>(ibuf);
    CHECK(cudaDeviceSynchronize() == cudaSuccess, "k_syncwarp failed: %s", kemu_last_report());
    cudaMemcpy(lanes, ibuf, 32 * sizeof(int), cudaMemcpyDeviceToHost);
    for (i = 0, bad = 0; i < 32 && bad < 3; i++) bad += !CHECK(lanes[i] == ((i + 1) & 31), "lane %d: %d", i, lanes[i]);
    test_end();

    test_begin("grid_3d");
    {
        int *count, *tsum, hc[60], ht[60];
        cudaMalloc((void **)&count, sizeof hc);
        cudaMalloc((void **)&tsum, sizeof ht);
        cudaMemset(count, 0, sizeof hc);
        k_grid3<<<dim3(3, 4, 5), dim3(4, 3, 2), 24 * sizeof(int)>>>(count, tsum);
        CHECK(cudaDeviceSynchronize() == cudaSuccess, "k_grid3 failed: %s", kemu_last_report());
        cudaMemcpy(hc, count, sizeof hc, cudaMemcpyDeviceToHost);
        cudaMemcpy(ht, tsum, sizeof ht, cudaMemcpyDeviceToHost);
        for (i = 0, bad = 0; i < 60 && bad < 3; i++)
            bad += !CHECK(hc[i] == 1 && ht[i] == 23 * 24 / 2, "block %d: ran %d times, thread sum %d", i, hc[i], ht[i]);
        cudaFree(count);
        cudaFree(tsum);
    }
    test_end();
    test_begin("no_reports_when_correct");
    CHECK(kemu_reports() == before, "the correct kernels drew %ld reports; the last: %s", kemu_reports() - before,
          kemu_last_report());
    test_end();
    cudaFree(ibuf); cudaFree(in); cudaFree(sums); cudaFree(buf);
    return test_summary();
}
